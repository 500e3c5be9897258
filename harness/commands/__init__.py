"""One module per `harness` subcommand, each exposing `register(subparsers)`, in the order `harness --help` lists them.

COMMANDS gives each command the line that listing shows. `harness --help` is built from this table alone, so it
imports no command module: a command's module, and whatever it needs (scipy, pandas, matplotlib, onnx, the Docker
SDK), loads only when the command is named.
"""

COMMANDS: dict[str, str] = {
    "profile": "measure models under the device profile's limits",
    "sweep": "models x CPUS values x repeats, one session and one report",
    "doctor": "what this machine can enforce",
    "import-device": "import on-device measurements: a CSV or device tools' logs (see docs/device-logs.md)",
    "devices": "the device library: every device table, shipped or imported, with its provenance",
    "probe": "measure a device's kernels (zoo models' per-op rows, designed kernels) into a kernel table",
    "regress": "calibrate harness numbers against a device's (fits compared by nested leave-one-out)",
    "predict": "predict device values (95%% prediction interval) for profiled models",
    "suggest": "which profiled models to measure on the device next (largest interval shrinkage)",
    "rank": "rank the session's models; not-significant differences share a rank",
    "report": "write report.md + report.html (+ PNG, CSV, JSON) for a session",
    "zoo": "list or export the built-in model zoo (random weights)",
    "quantize": "write an int8 variant of an ONNX model (onnxruntime.quantization)",
    "compare": "two models side by side: size, params, MACs, latency, memory, with B/A ratios",
    "ops": "per-operator table of a model profiled with --per-op",
    "check": "regression gate: exit 1 when a model got slower or bigger than in a baseline session",
    "image": "build the Docker runtime image (IMAGE) for BACKEND=docker",
    "target": "a board over SSH (TARGET=ssh://...): check what it has, set up its engines, clean it",
}
