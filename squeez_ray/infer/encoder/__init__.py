"""The encoder backend's runtime: tokens and windows, the line scorer (ONNX Runtime or torch), fusion
with cheap line features, operating points, and the pruner that ties them (``pruner``)."""
