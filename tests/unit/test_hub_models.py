"""Hub model ids (``Org/name``) resolve through a Hugging Face cache for every model-taking entry point;
offline or unreachable, one line naming the cache and HF_HUB_OFFLINE. A tiny model is placed in a
temporary cache with the hub's own layout (models--Org--name/snapshots/<rev>/, refs/main); nothing
here reaches a network (the one "online" case points the hub at a closed loopback port)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.hub import ModelNotFoundError, is_hub_id, resolve_model

REV = "0123456789abcdef0123456789abcdef01234567"
SQUEEZ = Path(sys.executable).parent / "squeez"


@pytest.fixture
def hf_cache(tmp_path, tiny_qwen3_dir, monkeypatch):
    """A cache holding Org/tiny (a copy of the tiny Qwen3), pointed at by HF_HUB_CACHE, offline."""
    cache = tmp_path / "hf" / "hub"
    repo = cache / "models--Org--tiny"
    shutil.copytree(tiny_qwen3_dir, repo / "snapshots" / REV)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_a_cached_hub_id_resolves_to_its_snapshot(hf_cache):
    snapshot = str(hf_cache / "models--Org--tiny" / "snapshots" / REV)
    assert resolve_model("Org/tiny") == snapshot
    assert resolve_model(f"Org/tiny@{REV}") == snapshot
    assert is_hub_id("Org/tiny") and not is_hub_id(str(hf_cache))
    assert resolve_model(str(hf_cache)) == str(hf_cache)  # a folder is itself


def test_hf_home_is_honoured_too(hf_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(hf_cache.parent))
    assert resolve_model("Org/tiny").endswith(REV)


def test_offline_and_not_cached_is_one_line_naming_the_cache(hf_cache):
    with pytest.raises(ModelNotFoundError) as error:
        resolve_model("Org/missing", what="--model")
    message = str(error.value)
    assert "\n" not in message and str(hf_cache) in message and "HF_HUB_OFFLINE" in message
    assert message.startswith("--model 'Org/missing' is not in the Hugging Face cache")


def test_unreachable_hub_is_one_line_naming_the_cache(hf_cache, monkeypatch):
    import huggingface_hub.constants as constants

    with socket.socket() as probe:  # a loopback port nobody listens on: refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", f"http://127.0.0.1:{port}" + "/{repo_id}/resolve/{revision}/{filename}")
    with pytest.raises(ModelNotFoundError) as error:
        resolve_model("Org/missing")
    message = str(error.value)
    assert "\n" not in message and str(hf_cache) in message and "HF_HUB_OFFLINE" in message
    assert "the hub is unreachable (" in message and "Connect" in message
    assert resolve_model("Org/tiny").endswith(REV)  # cached: found without asking the hub


def test_a_missing_path_is_not_mistaken_for_a_hub_id(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no such checkpoint directory"):
        resolve_model(str(tmp_path / "nope"))
    with pytest.raises(ModelNotFoundError, match="no such checkpoint directory"):
        resolve_model("./runs/nope")


def test_backends_eval_serve_and_train_take_a_hub_id(hf_cache):
    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.evaluate.local import token_counter
    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.serve.config import ServeAppConfig
    from squeez_ray.train.config import ModelSection
    from squeez_ray.train.model import resolve_base

    pruner = build_pruner("transformers", model="Org/tiny")  # squeez --model, squeez eval, re-prune
    try:
        assert pruner.engine.model_name == REV
        assert pruner.prune("which test failed", "a\nb\nc", fail_open=False).total_lines == 3
    finally:
        pruner.close()
    count, label = token_counter(BackendOptions(model="Org/tiny"))
    assert count is not None and label == "tokenizer of Org/tiny"
    serve = ServeAppConfig(model="Org/tiny")
    assert serve.resolved_model() == "Org/tiny" and serve.local_model().endswith(REV)
    assert resolve_base(ModelSection(base="Org/tiny"), Path(".")) == "Org/tiny"
    with pytest.raises(ModelNotFoundError, match="model.base 'Org/missing' is not in the Hugging Face cache"):
        resolve_base(ModelSection(base="Org/missing"), Path("."))


def test_squeez_cli_with_a_hub_id(hf_cache, tmp_path):
    import os

    env = {**os.environ, "HOME": str(tmp_path / "home"), "SQUEEZ_STORE": str(tmp_path / "store")}
    log = "\n".join(f"line {i}" for i in range(30)).encode()
    ok = subprocess.run([str(SQUEEZ), "--backend", "transformers", "--model", "Org/tiny", "--strict", "which line"],
                        input=log, capture_output=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr.decode()
    missing = subprocess.run([str(SQUEEZ), "--backend", "transformers", "--model", "Org/missing", "--strict", "q"],
                             input=log, capture_output=True, env=env, timeout=300)
    assert missing.returncode != 0
    err = missing.stderr.decode()
    assert "'Org/missing' is not in the Hugging Face cache" in err and "HF_HUB_OFFLINE" in err and str(hf_cache) in err
