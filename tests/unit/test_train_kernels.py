"""The kernel check imports each Qwen 3.5 kernel the way transformers does AND runs a tiny op with it: a package
that is present but broken (built against another torch, no kernel for this GPU) is reported, not trusted."""

from __future__ import annotations

import sys

import pytest

from squeez_ray.testing.jobs import load_job
from squeez_ray.train import kernels

pytestmark = pytest.mark.unit

_BROKEN_CONV = 'raise ImportError("causal_conv1d_cuda.so: undefined symbol: _ZN3c104cuda9SetDevice")\n'
_FAILING_FLA = 'def chunk_gated_delta_rule(*a, **k):\n    raise RuntimeError("no kernel image is available")\n'
_WORKING_CONV = 'def causal_conv1d_fn(x, weight, bias=None, activation=None):\n    return x\n'
_WORKING_FLA = 'def chunk_gated_delta_rule(q, k, v, g, beta, **kw):\n    return v, None\n'


def _fake_packages(root, conv: str, fla: str) -> None:
    (root / "causal_conv1d").mkdir()
    (root / "causal_conv1d" / "__init__.py").write_text(conv)
    (root / "fla" / "ops").mkdir(parents=True)
    (root / "fla" / "__init__.py").write_text("")
    (root / "fla" / "ops" / "__init__.py").write_text("")
    (root / "fla" / "ops" / "gated_delta_rule.py").write_text(fla)


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(sys.modules):
        if name.split(".")[0] in ("fla", "causal_conv1d"):
            monkeypatch.delitem(sys.modules, name)
    before = set(sys.modules)
    yield tmp_path
    # The fake packages, and any transformers modeling module imported meanwhile, must not outlive the
    # test: transformers binds a kernel when its modeling module is first imported, and a Qwen 3.5 model
    # built later in this worker ran the fake "no kernel image" op (seen when xdist put the loss tests
    # after these).
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("fla", "causal_conv1d") or name.startswith("transformers.models."):
            del sys.modules[name]


def test_present_but_broken_kernels_are_reported(fake_root):
    _fake_packages(fake_root, _BROKEN_CONV, _FAILING_FLA)
    problems = kernels.kernel_problems(device="cpu")
    assert set(problems) == {"causal-conv1d", "flash-linear-attention"}
    assert "does not import" in problems["causal-conv1d"] and "undefined symbol" in problems["causal-conv1d"]
    assert "tiny op fails" in problems["flash-linear-attention"] and "no kernel image" in problems["flash-linear-attention"]
    # find_spec sees both packages; the check must not.
    assert kernels.missing_kernels() == ["causal-conv1d", "flash-linear-attention"]


def test_kernels_that_import_and_run_pass(fake_root):
    _fake_packages(fake_root, _WORKING_CONV, _WORKING_FLA)
    assert kernels.kernel_problems(device="cpu") == {}


def test_cli_passes_on_a_node_without_cuda(capsys):
    # cluster.yaml runs `--require` on every node; CPU nodes have nothing to check and must not fail setup.
    assert load_job("check_kernels").main(["--require"]) == 0
    assert "no CUDA device" in capsys.readouterr().out
