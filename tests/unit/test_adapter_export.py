"""jobs/export_adapter.py: a checkpoint's adapter as a small, portable folder that merges and trains on."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from squeez_ray.testing.jobs import load_job

def _checkpoint(tmp_path: Path, base: Path) -> Path:
    """A training checkpoint as Ray Train leaves it: adapter, optimizer state, squeez_train.json."""
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, PROMPT_FORMAT
    from squeez_ray.train.config import LoraSection, ModelSection
    from squeez_ray.train.model import apply_lora, load_base_model

    model = apply_lora(load_base_model(str(base), ModelSection(base=str(base), dtype="float32")), LoraSection(r=4, alpha=8))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_()
    folder = tmp_path / "run" / "checkpoint_000004"
    model.save_pretrained(folder)
    (folder / "optimizer.pt").write_bytes(b"\0" * 1000)
    (folder / "squeez_train.json").write_text(json.dumps({
        "base_model": "tiny-qwen3", "base_model_path": "/machine/that/trained/it", "prompt_format": PROMPT_FORMAT,
        "model_family": "qwen", "system_prompt": DEFAULT_SYSTEM_PROMPT, "global_step": 4, "metrics": {},
        "config": {"model": {"dtype": "float32"}}}))
    return folder




def test_export_keeps_the_adapter_in_bf16_names_the_base_and_merges(tmp_path, tiny_qwen3_dir):
    from safetensors.torch import load_file

    from squeez_ray.train.merge import merge_adapter

    source = _checkpoint(tmp_path, tiny_qwen3_dir)
    out = tmp_path / "shipped"
    assert load_job("export_adapter").main([str(source.parent), "--out", str(out), "--base-name", str(tiny_qwen3_dir)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["adapter_config.json", "adapter_model.safetensors",
                                                     "squeez_train.json"]
    original, exported = load_file(source / "adapter_model.safetensors"), load_file(out / "adapter_model.safetensors")
    assert exported.keys() == original.keys()
    assert all(t.dtype == torch.bfloat16 for t in exported.values())
    assert all(torch.allclose(exported[k].float(), original[k], rtol=1e-2, atol=1e-3) for k in original)
    meta = json.loads((out / "squeez_train.json").read_text())
    assert meta["base_model_path"] == str(tiny_qwen3_dir) and meta["global_step"] == 4
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_qwen3_dir)
    manifest = merge_adapter(out, tmp_path / "merged")  # a checkpoint to jobs/merge.py
    assert manifest["base_model_path"] == str(tiny_qwen3_dir) and (tmp_path / "merged" / "config.json").is_file()


def test_export_refuses_to_overwrite_and_keeps_a_model_card(tmp_path, tiny_qwen3_dir, capsys):
    source = _checkpoint(tmp_path, tiny_qwen3_dir)
    out = tmp_path / "shipped"
    out.mkdir()
    (out / "MODEL_CARD.md").write_text("# card\n")
    job = load_job("export_adapter")
    assert job.main([str(source), "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert job.main([str(source), "--out", str(out), "--overwrite", "--dtype", "float32"]) == 0
    assert (out / "MODEL_CARD.md").read_text() == "# card\n"
    assert json.loads((out / "squeez_train.json").read_text())["base_model_path"] == "tiny-qwen3"
    assert job.main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2
    assert job.main([str(source), "--out", str(tmp_path / "y"), "--dtype", "int8"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not list(tmp_path.glob(".shipped.*"))  # no staging folder left behind
    assert out.stat().st_mode & 0o055 and all(p.stat().st_mode & 0o044 for p in out.iterdir())  # not owner-only
