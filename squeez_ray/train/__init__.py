"""Training: LoRA fine-tuning on Ray Train and merging the adapter (issue 4); the encoder's recipe.

``config`` the TrainConfig sections; ``data`` tokenise + mask (Ray Data stage); ``model`` base
resolution, loading, LoRA; ``loop`` the per-worker HF Trainer loop and its Ray callbacks; ``evaluate``
in-training generation scores; ``run`` the TorchTrainer launcher (jobs/train.py); ``merge`` adapter
merge + vLLM check (jobs/merge.py); ``synthetic`` a small labelled set for smoke runs and tests.

The encoder line scorer's recipe sits beside it: ``encoder_run`` (Ray Train job), ``encoder_data``,
``encoder_loss``, ``encoder_calibration`` (thresholds on dev), ``encoder_export`` (ONNX) and
``encoder_ship`` (checks and the model card); its runtime is in ``infer/encoder_*``.
"""
