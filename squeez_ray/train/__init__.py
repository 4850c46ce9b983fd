"""Training: LoRA fine-tuning on Ray Train and merging the adapter (issue 4); the encoder's recipe.

``config`` the TrainConfig sections; ``data`` tokenise + mask (Ray Data stage); ``model`` base
resolution, loading, LoRA; ``loop`` the per-worker HF Trainer loop and its Ray callbacks; ``evaluate``
in-training generation scores; ``run`` the TorchTrainer launcher (jobs/train.py); ``merge`` adapter
merge + vLLM check (jobs/merge.py); ``synthetic`` a small labelled set for smoke runs and tests.

The encoder line scorer's recipe is the ``encoder`` sub-package; its runtime is ``infer/encoder/``.
"""
