"""Config fields of hub bases the memory plan knows without a download (the text config of each)."""

from __future__ import annotations

QWEN35_2B_TEXT = {
    "model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 2048, "intermediate_size": 6144,
    "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
    "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
    "max_position_embeddings": 262144, "rms_norm_eps": 1.0e-6, "tie_word_embeddings": True,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
}

KNOWN_ARCHITECTURES = {
    "Qwen/Qwen3.5-2B-Base": QWEN35_2B_TEXT,
    "Qwen/Qwen3.5-2B": QWEN35_2B_TEXT,
}
