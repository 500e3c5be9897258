"""Models as the harness sees them: a typed MODEL resolved to a checked file with its bench script (resolve), and
the static facts of an ONNX graph (facts: MACs, parameters, layers, op mix)."""
