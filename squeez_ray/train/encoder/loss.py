"""The encoder's line loss: class-weighted BCE on the hand labels, optionally blended with a teacher.

Distillation (``teacher_model`` in the training config) trains a smaller encoder to reproduce a
larger one's per-line probabilities as well as the labels. The teacher's probabilities say how sure
it is about every line, including the many unlabelled-negative ones, which is far more signal per
window than 0/1 labels; that is what lets a 4-layer student keep most of a 6-layer model's quality
at two thirds of its cost per token (docs/encoder-history.md, "Encoder v3-L4d").
"""

from __future__ import annotations

from typing import Any


def line_loss(logits: Any, labels: Any, pos_weight: Any, teacher_logits: Any = None,
              distill_weight: float = 0.5) -> Any:
    """Mean loss over a batch's real window lines (label >= 0; padding rows carry -1).

    Without a teacher: BCE against the labels with positives weighted by ``pos_weight``. With one:
    ``(1 - w) * that + w * BCE(student, sigmoid(teacher))``, soft targets unweighted (the teacher was
    trained with the same positive weight, so its probabilities already carry it).
    """
    import torch.nn.functional as F

    valid = labels >= 0
    student = logits[valid].float()
    hard = F.binary_cross_entropy_with_logits(student, labels[valid], pos_weight=pos_weight)
    if teacher_logits is None or distill_weight == 0:
        return hard
    soft_targets = teacher_logits[valid].float().sigmoid()
    soft = F.binary_cross_entropy_with_logits(student, soft_targets)
    return (1 - distill_weight) * hard + distill_weight * soft
