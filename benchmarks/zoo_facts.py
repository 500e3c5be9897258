"""Zoo facts against the literature, and what int8 quantization changes under a device preset.

    .venv/bin/python benchmarks/zoo_facts.py [--model mobilenet_v2_1.0_224] [--repeats 5] [--iterations 200]

Part 1 exports the zoo models that have published multiply-add counts and prints harness.models.facts'
MACs beside them (goals: MobileNetV1 1.0/224 and ResNet-18 within 2%), then the newer families' MACs and
parameters beside harness.zoo.published's figures (goals: each within 2%). Part 2 profiles MODEL and its two
int8 variants in one interleaved session under devices/jetson-nano.env at CPUS=1 (local backend) and prints
size, latency and memory with their ratios to the float model, as `harness compare` does.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, Goal, pct, print_table, profile_runs, write_report, zoo_model

from harness.analysis.stats import metric_value, summarize
from harness.models.facts import onnx_facts
from harness.zoo.published import PUBLISHED as PUBLISHED_FACTS
from harness.zoo.published import TOLERANCE

# name -> (published multiply-adds, where it is published, goal tolerance in % or None for information)
PUBLISHED: dict[str, tuple[float, str, float | None]] = {
    "mobilenet_v1_1.0_224": (569e6, "MobileNetV1 paper, Table 8", 2.0),
    "resnet18": (1.82e9, "ResNet paper, Table 1 (1.8G)", 2.0),
    "mobilenet_v2_1.0_224": (300e6, "MobileNetV2 paper, Table 4", None),
    "mobilenet_v2_0.5_224": (97e6, "TF-Slim MobileNet table", None),
    "shufflenet_v2_x1_0": (146e6, "ShuffleNetV2 paper", None),
    "shufflenet_v2_x0_5": (41e6, "ShuffleNetV2 paper", None),
    "resnet50": (4.09e9, "torchvision model table", None),
    "inception_v1": (1.50e9, "torchvision model table (googlenet)", None),
    "inception_v3": (5.71e9, "torchvision model table", None),
}
MEASURED = ("latency_p50_ms", "peak_memory_mib", "peak_rss_mib", "avg_memory_mib")


def macs_rows() -> tuple[list[dict[str, Any]], list[Goal]]:
    rows, goals = [], []
    for name, (published, source, tolerance) in PUBLISHED.items():
        facts = onnx_facts(zoo_model(name))
        error = pct(facts["macs"], published)
        rows.append({"model": name, "MMACs": facts["macs"] / 1e6, "published_MMACs": published / 1e6,
                     "error_%": error, "params_M": facts["params"] / 1e6, "size_MiB": facts["size_mib"],
                     "source": source})
        if tolerance is not None:
            goals.append(Goal(f"{name} MACs", f"within {tolerance:g}% of {published / 1e6:g}M",
                              f"{facts['macs'] / 1e6:.1f}M ({error:+.2f}%)", abs(error) <= tolerance))
    return rows, goals


def published_rows() -> tuple[list[dict[str, Any]], list[Goal]]:
    """The newer families' MACs and parameters against their published figures (None where none is published)."""
    rows, goals = [], []
    for name, figure in PUBLISHED_FACTS.items():
        facts = onnx_facts(zoo_model(name), figure.dims)  # a dynamic model at its published size
        row: dict[str, Any] = {"model": name}
        for key, published in (("macs", figure.macs), ("params", figure.params)):
            error = None if published is None else pct(facts[key], published)
            row |= {f"{key}_M": facts[key] / 1e6, f"published_{key}_M": published and published / 1e6,
                    f"{key}_error_%": error}
            if error is not None:
                goals.append(Goal(f"{name} {key}", f"within {TOLERANCE:.0%} of {published / 1e6:g}M",
                                  f"{facts[key] / 1e6:.2f}M ({error:+.2f}%)", abs(error) <= TOLERANCE * 100))
        other = figure.macs_counted_otherwise
        rows.append({**row, "macs_counted_otherwise_M": other and other / 1e6, "source": figure.source})
    return rows, goals


def int8_rows(model: str, repeats: int, iterations: int) -> list[dict[str, Any]]:
    names = [model, f"{model}_int8_static", f"{model}_int8_dynamic"]
    paths = [zoo_model(name) for name in names]
    with tempfile.TemporaryDirectory(prefix="bench-int8-") as tmp:
        session = profile_runs(Path(tmp), None, [], backend="local", repeats=repeats, models=paths,
                               extra_flags=["--env", str(ROOT / "devices" / "jetson-nano.env"), "--cpus", "1",
                                            "--iterations", str(iterations)])
    by_path = {str(path.resolve()): name for name, path in zip(names, paths, strict=True)}
    medians: dict[str, dict[str, float]] = {}
    for name in names:
        runs = [run for run in session.runs if by_path.get(run["model_path"]) == name]
        medians[name] = {metric: summarize([metric_value(run, metric) for run in runs]).median
                         for metric in MEASURED}
        medians[name]["size_mib"] = onnx_facts(paths[names.index(name)])["size_mib"]
    base = medians[model]
    return [{"model": name, **values,
             **{f"{key}_ratio": values[key] / base[key] for key in ("size_mib", "latency_p50_ms", "peak_memory_mib")}}
            for name, values in medians.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2_1.0_224", help="a float zoo model")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    rows, goals = macs_rows()
    print_table("Zoo MACs (one sample) against published figures", rows)
    newer, newer_goals = published_rows()
    print_table("Newer families: MACs and parameters against published figures", newer)
    goals += newer_goals
    quant = int8_rows(args.model, args.repeats, args.iterations)
    print_table(f"{args.model} and its int8 variants · jetson-nano preset, CPUS=1 · medians over repeats", quant)
    static = next(row for row in quant if row["model"].endswith("_int8_static"))
    goals.append(Goal("int8 static size and latency change", "shown (information)",
                      f"size {static['size_mib_ratio']:.3f}x, latency p50 {static['latency_p50_ms_ratio']:.3f}x",
                      None))
    write_report("zoo_facts", rows + quant, goals, tables={"published": newer})


if __name__ == "__main__":
    main()
