"""jobs/export_encoder.py: export a trained encoder checkpoint to ONNX (fp32 + int8), calibrate int8 on the
dev split, optionally measure torch / fp32 / int8 on labelled cases and install the result as the
package's default model (``ship``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def export_encoder(checkpoint: str | Path, out: str | Path, *, dev_data: str | None = None,
                   overlap_lines: int | None = None, eval_data: str | None = None, torch_eval: bool = True,
                   ship: bool = False, ship_dir: str | Path | None = None,
                   description: str | None = None) -> dict[str, Any]:
    """What was written (the export's info, calibrations, quality, where it was shipped)."""
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.schema import read_examples
    from squeez_ray.train.encoder import ship as shipping
    from squeez_ray.train.encoder.calibration import calibrate_variant, set_overlap
    from squeez_ray.train.encoder.export import export_checkpoint

    checkpoint = Path(checkpoint)
    dev = _dev_data(checkpoint, dev_data)
    if overlap_lines is not None and not dev:
        raise ValueError("--overlap-lines changes the windows, so the thresholds must be recalibrated: "
                         "give --dev-data (or a checkpoint whose manifest names its dev split)")
    info = export_checkpoint(checkpoint, out)
    if overlap_lines is not None:
        info["window"] = set_overlap(out, overlap_lines)
        info["fp32_calibration"] = calibrate_variant(out, read_examples(dev), "fp32")
    if dev:
        info["int8_calibration"] = calibrate_variant(out, read_examples(dev), "int8")
        info["int8_calibration"]["dev_data"] = dev
    quality = None
    if eval_data:
        # the torch checkpoint scores with its training windows: not comparable once they changed
        with_torch = torch_eval and overlap_lines is None
        quality = _measure(checkpoint, Path(out), eval_data, with_torch=with_torch)
        info["quality"] = quality
        (Path(out) / "quality.json").write_text(json.dumps(quality, indent=2) + "\n")
    if ship:
        variant = shipping.pick_variant(quality or {"onnx-int8": {}})
        card = shipping.model_card(Path(out), checkpoint, variant, quality, eval_data, description)
        target = Path(ship_dir) if ship_dir else DEFAULT_MODEL_DIR
        info["shipped"] = {"dir": str(target), "variant": variant,
                           "files": shipping.install(Path(out), target, variant, card)}
    return info


def _dev_data(checkpoint: Path, given: str | None) -> str | None:
    """The dev split int8 is calibrated on: --dev-data, else the one the checkpoint was calibrated on."""
    if given:
        return None if given.lower() == "none" else given
    manifest = checkpoint / "manifest.json"
    recorded = json.loads(manifest.read_text()).get("inputs", {}).get("dev") if manifest.is_file() else None
    return recorded if recorded and Path(recorded).exists() else None


def _measure(checkpoint: Path, export_dir: Path, data: str, *, with_torch: bool) -> dict:
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.schema import read_examples
    from squeez_ray.train.encoder import ship as shipping

    examples = read_examples(data)
    systems = {}
    if with_torch:
        from squeez_ray.infer.encoder.pruner import EncoderPruner

        systems["torch"] = EncoderPruner(checkpoint, dtype="float32")
    systems["onnx-fp32"] = OnnxEncoderPruner(export_dir, dtype="float32")
    systems["onnx-int8"] = OnnxEncoderPruner(export_dir, dtype="int8")
    return shipping.measure(examples, systems)
