"""The encoder line scorer's recipe: data, loss, the Ray Train job (``run``), calibration on dev,
ONNX export, the fusion and block-decoder fits, and shipping checks; its runtime is ``infer/encoder/``."""
