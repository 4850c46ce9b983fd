"""The encoder's line loss: labels alone, and blended with a teacher's probabilities (distillation)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from squeez_ray.train.encoder.loss import line_loss  # noqa: E402 - after the torch skip

F = torch.nn.functional
LABELS = torch.tensor([[1.0, 0.0, 0.0, -1.0], [0.0, 1.0, -1.0, -1.0]])  # -1: padding rows of short windows
LOGITS = torch.tensor([[2.0, -1.0, 0.5, 9.0], [-3.0, 0.2, -7.0, 4.0]])
POS_WEIGHT = torch.tensor(5.0)


def test_without_a_teacher_it_is_weighted_bce_over_the_real_lines_only():
    valid = LABELS >= 0
    expected = F.binary_cross_entropy_with_logits(LOGITS[valid], LABELS[valid], pos_weight=POS_WEIGHT)
    assert torch.allclose(line_loss(LOGITS, LABELS, POS_WEIGHT), expected)
    # padding never counts: changing a padded logit changes nothing
    moved = LOGITS.clone()
    moved[0, 3] = -50.0
    assert torch.allclose(line_loss(moved, LABELS, POS_WEIGHT), expected)
    assert torch.allclose(line_loss(LOGITS, LABELS, POS_WEIGHT, LOGITS, distill_weight=0.0), expected)


def test_with_a_teacher_the_loss_blends_labels_and_the_teachers_probabilities():
    teacher = torch.tensor([[1.0, -2.0, 3.0, 0.0], [-1.0, 2.0, 0.0, 0.0]])
    valid = LABELS >= 0
    hard = F.binary_cross_entropy_with_logits(LOGITS[valid], LABELS[valid], pos_weight=POS_WEIGHT)
    soft = F.binary_cross_entropy_with_logits(LOGITS[valid], teacher[valid].sigmoid())
    got = line_loss(LOGITS, LABELS, POS_WEIGHT, teacher, distill_weight=0.3)
    assert torch.allclose(got, 0.7 * hard + 0.3 * soft)


def test_pure_distillation_pulls_the_student_to_the_teachers_logits():
    # distill_weight 1: the gradient vanishes exactly where the student agrees with the teacher, and
    # points towards the teacher elsewhere, whatever the labels say
    teacher = torch.tensor([[1.0, -2.0, 3.0, 0.0], [-1.0, 2.0, 0.0, 0.0]])
    at_teacher = teacher.clone().requires_grad_(True)
    line_loss(at_teacher, LABELS, POS_WEIGHT, teacher, distill_weight=1.0).backward()
    assert torch.allclose(at_teacher.grad, torch.zeros_like(teacher), atol=1e-7)
    below = (teacher - 1.0).requires_grad_(True)
    line_loss(below, LABELS, POS_WEIGHT, teacher, distill_weight=1.0).backward()
    valid = LABELS >= 0
    assert (below.grad[valid] < 0).all() and (below.grad[~valid] == 0).all()  # descent raises every real logit
