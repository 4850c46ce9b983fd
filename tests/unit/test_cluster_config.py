"""cluster.yaml must pass the same checks `ray up` applies (defaults filled, then Ray's JSON schema), offline."""

from __future__ import annotations

import copy
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _validate(config: dict) -> dict:
    from ray.autoscaler._private.util import prepare_config, validate_config

    full = prepare_config(copy.deepcopy(config))
    validate_config(full)
    return full


@pytest.fixture(scope="module")
def cluster_config() -> dict:
    return yaml.safe_load((REPO / "cluster.yaml").read_text())


def test_cluster_yaml_passes_ray_schema(cluster_config):
    full = _validate(cluster_config)
    groups = full["available_node_types"]
    assert full["head_node_type"] == "head"
    # A CPU group for collection/labelling and an A100 group for training/serving, both autoscaled.
    assert groups["cpu_worker"]["max_workers"] >= 1 and groups["cpu_worker"]["min_workers"] == 0
    assert groups["gpu_worker"]["max_workers"] >= 1 and groups["gpu_worker"]["min_workers"] == 0
    assert any("pip install" in c and "-e" in c for c in full["setup_commands"])
    assert full["file_mounts"] == {"~/squeez-ray": "."}


def test_gpu_group_carries_a_card_the_recipe_fits(cluster_config):
    # The recipe's plan against the card the cluster declares (p4d's 40 GB A100 needs 110% of it).
    from squeez_ray.config import load_config
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.devices import EC2_INSTANCE_DEVICES, KNOWN_DEVICES
    from squeez_ray.train.memory_plan import plan_memory

    instance = cluster_config["available_node_types"]["gpu_worker"]["node_config"]["InstanceType"]
    assert instance in EC2_INSTANCE_DEVICES, f"{instance}: add its card to devices.EC2_INSTANCE_DEVICES"
    device = KNOWN_DEVICES[EC2_INSTANCE_DEVICES[instance]]
    for name in ("qwen35_2b_lora.yaml", "qwen35_2b_lora_zero.yaml"):
        plan = plan_memory(load_config(TrainConfig, REPO / "jobs/configs" / name, {}), device)
        assert plan.fits, f"{name} on {instance}:\n{plan.table()}"


def test_setup_installs_into_python_311_and_builds_causal_conv1d_against_the_installed_torch(cluster_config):
    commands = cluster_config["setup_commands"]
    # The DLAMI's system python3 is 3.10: nothing may install the project into it.
    assert not any("python3 -m pip install" in c and "-e" in c for c in commands)
    venv = next(i for i, c in enumerate(commands) if "venv --python 3.11" in c)
    project = next(i for i, c in enumerate(commands) if "-e \".[gpu" in c)
    conv = next(i for i, c in enumerate(commands) if "causal-conv1d" in c)
    assert venv < project < conv and "--no-build-isolation" in commands[conv]
    assert "~/venv/bin/python" in commands[project] and "~/venv/bin/python" in commands[conv]
    # causal-conv1d must not also come in with the extra (it would be built in an isolated env first).
    pyproject = (REPO / "pyproject.toml").read_text()
    gpu_extra = next(line for line in pyproject.splitlines() if line.startswith("gpu = "))
    assert "causal-conv1d" not in gpu_extra
    assert any("jobs/check_kernels.py --require" in c for c in commands)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):  # ray and job drivers run the venv
        assert all("venv/bin" in c for c in cluster_config[key]), key


def test_schema_check_is_real(cluster_config):
    # The validation above must be able to fail: a misspelled node key is rejected.
    import jsonschema

    broken = copy.deepcopy(cluster_config)
    broken["available_node_types"]["head"]["node_confg"] = broken["available_node_types"]["head"].pop("node_config")
    with pytest.raises((jsonschema.ValidationError, ValueError, KeyError)):
        _validate(broken)


def test_head_installs_boto3_into_the_python_the_autoscaler_runs(cluster_config):
    # Ray's AWS node provider imports boto3 on the head; Ray does not depend on it, so without this line the
    # autoscaler never starts a worker and, with the head's 0 CPUs, every job waits.
    head = cluster_config.get("head_setup_commands") or []
    assert any("boto3==" in c and "--python ~/venv/bin/python" in c for c in head), head
    assert all("venv/bin" in c for c in cluster_config["head_start_ray_commands"])


def test_every_request_a_job_makes_has_a_worker_type_to_start(cluster_config):
    """The autoscaler's own bin-packing: with 0 CPUs on the head, each request must match a worker type's
    declared resources, or it waits forever (resources: {} leaves that to an EC2 lookup through boto3)."""
    from functools import partial

    from ray.autoscaler._private.node_provider_availability_tracker import NodeAvailabilitySummary
    from ray.autoscaler._private.resource_demand_scheduler import _default_utilization_scorer, get_nodes_for

    scorer = partial(_default_utilization_scorer, node_availability_summary=NodeAvailabilitySummary({}))
    full = _validate(cluster_config)
    types = full["available_node_types"]
    assert types["head"]["resources"] == {"CPU": 0}
    requests = {
        "a collection or labelling task": ({"CPU": 1}, "cpu_worker"),
        # fit_check.worker_task_options for qwen35_2b_lora.yaml with scaling.accelerator_type=H100
        "a training worker on H100": ({"CPU": 8, "GPU": 1, "accelerator_type:H100": 0.001}, "gpu_worker"),
        "a vLLM Serve replica": ({"GPU": 1}, "gpu_worker"),
    }
    for what, (demand, expected) in requests.items():
        to_add, residual = get_nodes_for(types, {"head": 1}, "head", full["max_workers"], [demand], scorer)
        assert not residual and dict(to_add) == {expected: 1}, f"{what} {demand}: {dict(to_add)}, left {residual}"


# what each apt package in the set-up provides of check_node.PROGRAMS (the rest come with any Ubuntu image)
APT_PROVIDES = {"git": {"git"}, "build-essential": {"cc", "c++", "make"}, "curl": {"curl"},
                "util-linux": {"unshare", "prlimit"}, "coreutils": {"cat", "ls"}, "grep": {"grep"}, "dash": {"sh"}}
BASE_IMAGE = {"coreutils", "grep", "dash"}


def _check_node():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import check_node
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return check_node


def test_every_node_installs_the_tools_collection_runs_and_checks_them(cluster_config):
    import re

    check_node = _check_node()
    commands = cluster_config["setup_commands"]
    # Every program and `python -m` module collection runs is one check_node checks.
    tools = (REPO / "squeez_ray/collect/tools.py").read_text() + (REPO / "squeez_ray/collect/sandbox.py").read_text()
    ran = set(re.findall(r'Command\(\["([\w+-]+)"', tools)) - {"python"}
    ran |= {"unshare", "prlimit"} if "unshare" in tools else set()
    assert ran <= set(check_node.PROGRAMS), ran - set(check_node.PROGRAMS)
    modules = set(re.findall(r'"-m", "(\w+)"', tools)) - {"py_compile", "pyflakes"}  # stdlib / fallback only
    assert modules <= set(check_node.MODULES), modules - set(check_node.MODULES)
    # apt brings the programs, the dev extra the modules, in every node's set-up.
    apt = next(c for c in commands if "apt-get install" in c)
    packages = set(apt.split("apt-get install", 1)[1].split()) | BASE_IMAGE
    provided = set().union(*(APT_PROVIDES.get(p, set()) for p in packages))
    assert set(check_node.PROGRAMS) <= provided, set(check_node.PROGRAMS) - provided
    project = next(c for c in commands if '-e ".[gpu' in c)
    assert "dev" in re.search(r'-e "\.\[([\w,]+)\]"', project).group(1).split(",")
    pyproject = (REPO / "pyproject.toml").read_text()
    dev_extra = next(line for line in pyproject.splitlines() if line.startswith("dev = "))
    assert all(f'"{name}' in dev_extra for name in ("pytest", "coverage", "ruff", "mypy"))
    # The check is the last set-up step on each kind of node, in the jobs' Python.
    assert cluster_config["head_setup_commands"][-1].endswith("~/venv/bin/python scripts/check_node.py --role head")
    assert cluster_config["worker_setup_commands"][-1].endswith("~/venv/bin/python scripts/check_node.py --role worker")


def test_check_node_names_each_missing_program_and_package_on_one_line(tmp_path):
    check_node = _check_node()
    script = str(REPO / "scripts/check_node.py")
    ok = subprocess.run([sys.executable, script, "--role", "worker"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr  # this venv has the CPU set with the dev extra
    bare = subprocess.run([sys.executable, script, "--role", "head"], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(tmp_path)})  # an empty PATH: no program is found
    lines = bare.stderr.strip().splitlines()
    assert bare.returncode == 1 and all(line.startswith("check_node (head): ") for line in lines), lines
    assert sum("not on PATH" in line for line in lines) == len(check_node.PROGRAMS)
    assert any(line.startswith("check_node (head): program git not on PATH") for line in lines)
    boto3_here = importlib.util.find_spec("boto3") is not None
    assert any("package boto3" in line for line in lines) != boto3_here
