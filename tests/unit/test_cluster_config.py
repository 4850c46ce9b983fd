"""cluster.yaml must pass the same checks `ray up` applies (defaults filled, then Ray's JSON schema), offline."""

from __future__ import annotations

import copy
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
    assert groups["a100_worker"]["node_config"]["InstanceType"].startswith(("p4d", "p4de"))
    assert any("pip install" in c and "-e" in c for c in full["setup_commands"])
    assert full["file_mounts"] == {"~/squeez-ray": "."}


def test_schema_check_is_real(cluster_config):
    # The validation above must be able to fail: a misspelled node key is rejected.
    import jsonschema

    broken = copy.deepcopy(cluster_config)
    broken["available_node_types"]["head"]["node_confg"] = broken["available_node_types"]["head"].pop("node_config")
    with pytest.raises((jsonschema.ValidationError, ValueError, KeyError)):
        _validate(broken)
