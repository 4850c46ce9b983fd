"""Operating points of an encoder at run time: the threshold for a recall target, a kept-lines budget.

A line scorer keeps every line at or above a threshold; where that threshold sits decides how much of
what the agent needs survives (recall) and how much it reads (compression). An agent that loses
evidence re-runs the command without squeez, so recall is a knob users turn: ``--recall-target 0.7``
or a kept-lines budget, in the CLI, the config file and each Serve request. The dev curve these read
is measured once at calibration (``squeez_ray/train/encoder/operating_curve.py``) and stored in
``squeez_encoder.json`` per runtime variant (int8 scores shift), so choosing a point costs nothing.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


def threshold_for_recall(curve: Sequence[Mapping[str, Any]], recall_target: float, *, lenient: bool = False
                         ) -> float:
    """The stored threshold that reached ``recall_target`` on dev (the next stored target up when it
    falls between two). Beyond the curve: an error naming what it does reach, or with ``lenient``
    (a per-request knob, where failing the request would cost the agent its output) the curve's most
    lenient point."""
    if not 0 < recall_target <= 1:
        raise ValueError(f"recall_target must be in (0, 1], got {recall_target}")
    if not curve:
        raise ValueError("this encoder has no dev operating curve (squeez_encoder.json 'operating_points'): "
                         "calibrate it with jobs/calibrate_encoder.py, or set a threshold instead")
    for point in sorted(curve, key=lambda p: p["target_recall"]):
        if point["target_recall"] >= recall_target - 1e-9:
            return float(point["threshold"])
    best = max(curve, key=lambda p: p["recall"])
    if lenient:
        return float(best["threshold"])
    raise ValueError(f"recall_target {recall_target} is beyond this encoder's dev curve "
                     f"(it reaches recall {best['recall']:.2f} at compression {best['compression']:.2f})")


def cap_kept_lines(kept: Sequence[int], scores: np.ndarray, max_kept_lines: int | None) -> list[int]:
    """At most ``max_kept_lines`` of the kept (1-based) lines: the highest-scoring ones, in source order."""
    if not max_kept_lines or len(kept) <= max_kept_lines:
        return list(kept)
    ranked = sorted(kept, key=lambda n: (-float(scores[n - 1]), n))
    return sorted(ranked[:max_kept_lines])


def check_knobs(recall_target: float | None, max_kept_lines: int | None) -> None:
    """One-line errors for knob values no operating point can honour."""
    if recall_target is not None and not 0 < recall_target <= 1:
        raise ValueError(f"recall_target must be in (0, 1], got {recall_target}")
    if max_kept_lines is not None and max_kept_lines < 1:
        raise ValueError(f"max_kept_lines must be at least 1, got {max_kept_lines}")
