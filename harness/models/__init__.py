"""Models as the harness sees them: a typed MODEL resolved to a checked file with its bench script (resolve), the
static facts of an ONNX graph (facts: MACs, parameters, layers, op mix), and a model's architecture family
(families)."""
