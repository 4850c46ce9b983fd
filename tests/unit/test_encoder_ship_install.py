"""Installing an export as the package model: only the shipped files, atomically, readable by everyone."""

from __future__ import annotations

import json
import os
import stat

import pytest


def _export(tmp_path, fusion: bool):
    export = tmp_path / "export"
    export.mkdir()
    for name in ("model.int8.onnx", "model.onnx", "tokenizer.json", "manifest.json"):
        (export / name).write_text(name)
    settings = {"window": {}, "fusion": {"file": "fusion.json"} if fusion else {}}
    (export / "squeez_encoder.json").write_text(json.dumps(settings))
    if fusion:
        (export / "fusion.json").write_text("{}")
    return export


@pytest.mark.parametrize("fusion", [False, True])
def test_install_replaces_the_model_folder_with_the_shipped_files_readable_by_all(tmp_path, fusion):
    from squeez_ray.train.encoder.ship import install

    target = tmp_path / "pkg" / "default"
    target.mkdir(parents=True)
    (target / "stale.onnx").write_text("old")
    old_umask = os.umask(0o022)
    try:
        sizes = install(_export(tmp_path, fusion), target, "int8", {"name": "m"})
    finally:
        os.umask(old_umask)
    expected = {"model.int8.onnx", "tokenizer.json", "squeez_encoder.json", "model_card.json"} | (
        {"fusion.json"} if fusion else set())
    assert set(sizes) == expected == {p.name for p in target.iterdir()}  # the old folder is gone whole
    assert json.loads((target / "model_card.json").read_text())["files"] == sorted(expected)
    # a bare mkdtemp would leave the folder owner-only (0700): other users could not load the model
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044 for p in target.iterdir())
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".default.")]  # no staging left
