"""A user's own models, predicted from a probe of this host: torchvision architectures outside the zoo, exported as a
user exports one, each predicted from its graph by the probe's kernel table and compared with its measured latency.

    .venv/bin/python benchmarks/own_models.py [--cpus N] [--table KERNEL_TABLE_DIR] [--session SESSION_DIR]
                                              [--models a b ...] [--repeats N] [--budget-min MINUTES]

The models (OWN_MODELS) are families the zoo has none of (RegNetX, ResNeXt, DenseNet, ConvNeXt, Wide ResNet, the
Swin and MaxViT transformers) or sizes of its families it holds no model of (ResNet-34 and -50, RegNetY-800MF,
EfficientNet-B1, ...), and other tasks and layers (OTHER_TASKS: segmentation, video, a GRU, transposed
convolutions, audio networks' 1-D convolutions), built with random weights and exported with torch's TorchScript
exporter at opset 17. A default probe (`harness probe --cpus N`, `--budget-min` minutes: its zoo models and designed
kernels) makes the table, unless `--table` gives one of this host;
`harness profile --cpus N` measures the models (`--session` takes a session of them made before, to score another
version of the predictor on the same truth); each is predicted as `harness predict --device TABLE` predicts it.
Printed: per model its measured and predicted latency, the error, the 95% interval and the kinds no regressor of
their own carried; then the share within ±10% and ±5%, the median error and the interval's coverage.
Every figure is of this host at the hour it ran. A probe's table and a session made here stay in a folder under the
temporary directory (bench-own-models-*, 3–4 GB after a default probe), which the notes name; a rescore, given both,
removes its exports when it is done.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import Goal, harness, headline, load_note, print_table, profile_runs, shares, shown, write_report

from harness.kernels.predictor import predict_graph
from harness.kernels.table import KernelTable
from harness.store.results import list_sessions

OWN_MODELS = ("regnet_x_400mf", "regnet_x_800mf", "regnet_y_800mf", "regnet_x_1_6gf", "resnext50_32x4d", "resnet34",
              "resnet50", "wide_resnet50_2", "densenet121", "convnext_tiny", "mnasnet0_75", "shufflenet_v2_x1_5",
              "efficientnet_b1", "mobilenet_v3_small", "googlenet", "swin_t", "maxvit_t")
"""Grouped convolutions of 8 to 32 channels a group (RegNet, ResNeXt), dense concatenations (DenseNet), LayerNorm and
GELU (ConvNeXt), windowed attention (Swin-T: padding computed from Shape nodes; MaxViT-T: attention as Einsum, block
and grid partitions), and torchvision's own exports of families the zoo holds from other exporters."""


OTHER_TASKS = ("deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "inception_v3", "efficientnet_v2_s",
               "r2plus1d_18", "r3d_18", "gru_keyword_spotter", "conv_autoencoder", "m5_audio", "matchbox_kws")
"""Other tasks and layers: segmentation heads (DeepLabV3's atrous pyramid, whose dilated convolutions on a 14×14 map
read mostly padding; LR-ASPP's), Inception-V3 at 299×299, EfficientNetV2's fused blocks, video networks' 3-D
convolutions (R(2+1)D-18's factored ones and R3D-18's, on 8 frames of 56×56), a keyword spotter's two GRU layers (49
steps of 40 features), an image autoencoder's transposed convolutions, and 1-D convolutions: M5's over a second of
raw audio (16,000 samples, a first layer of 80 taps), MatchboxNet's depthwise-separable ones over 128 frames of 64
MFCCs: kinds no row of a default probe's table runs."""


def other_task(name: str) -> tuple[Any, tuple[int, ...]]:
    """An OTHER_TASKS model with random weights and its example input's shape."""
    import torch
    import torchvision
    from torch import nn

    class SegmentationMap(nn.Module):
        def __init__(self, model: nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)["out"]

    class KeywordSpotter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru, self.head = nn.GRU(40, 64, num_layers=2, batch_first=True), nn.Linear(64, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.gru(x)[0][:, -1])

    def autoencoder() -> nn.Module:
        down = [layer for cin, cout in ((3, 32), (32, 64), (64, 128)) for layer in (nn.Conv2d(cin, cout, 3, 2, 1),
                                                                                   nn.ReLU())]
        up = [layer for cin, cout in ((128, 64), (64, 32)) for layer in (nn.ConvTranspose2d(cin, cout, 4, 2, 1),
                                                                         nn.ReLU())]
        return nn.Sequential(*down, *up, nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Sigmoid())

    def m5() -> nn.Module:  # Dai et al. 2017, 35 keywords
        layers: list[nn.Module] = []
        for cin, cout, k, stride in ((1, 128, 80, 4), (128, 128, 3, 1), (128, 256, 3, 1), (256, 512, 3, 1)):
            layers += [nn.Conv1d(cin, cout, k, stride, padding=k // 2), nn.BatchNorm1d(cout), nn.ReLU(),
                       nn.MaxPool1d(4)]
        return nn.Sequential(*layers, nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(512, 35))

    class Separable(nn.Module):  # MatchboxNet's block: depthwise 1-D, pointwise, batch norm, a residual
        def __init__(self, cin: int, cout: int, k: int) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv1d(cin, cin, k, padding=k // 2, groups=cin), nn.Conv1d(cin, cout, 1),
                                      nn.BatchNorm1d(cout))
            self.skip = nn.Sequential(nn.Conv1d(cin, cout, 1), nn.BatchNorm1d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.body(x) + self.skip(x))

    def matchbox() -> nn.Module:  # 3x1x64 (Majumdar and Ginsburg 2020), 35 keywords
        return nn.Sequential(nn.Conv1d(64, 128, 11, 2, padding=5), nn.BatchNorm1d(128), nn.ReLU(),
                             Separable(128, 64, 13), Separable(64, 64, 15), Separable(64, 64, 17),
                             nn.Conv1d(64, 128, 29, dilation=2, padding=28), nn.ReLU(), nn.Conv1d(128, 128, 1),
                             nn.ReLU(), nn.Conv1d(128, 35, 1), nn.AdaptiveAvgPool1d(1), nn.Flatten())

    segmentation = torchvision.models.segmentation
    return {
        "deeplabv3_mobilenet_v3_large": (lambda: SegmentationMap(segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, aux_loss=False)), (1, 3, 224, 224)),
        "lraspp_mobilenet_v3_large": (lambda: SegmentationMap(segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None)), (1, 3, 224, 224)),
        "inception_v3": (lambda: torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False),
                         (1, 3, 299, 299)),
        "efficientnet_v2_s": (lambda: torchvision.models.efficientnet_v2_s(weights=None), (1, 3, 224, 224)),
        "r2plus1d_18": (lambda: torchvision.models.video.r2plus1d_18(weights=None), (1, 3, 8, 56, 56)),
        "r3d_18": (lambda: torchvision.models.video.r3d_18(weights=None), (1, 3, 8, 56, 56)),
        "m5_audio": (m5, (1, 1, 16000)),
        "matchbox_kws": (matchbox, (1, 64, 128)),
        "gru_keyword_spotter": (KeywordSpotter, (1, 49, 40)),
        "conv_autoencoder": (autoencoder, (1, 3, 128, 128)),
    }[name]


def export(directory: Path, names: list[str]) -> dict[str, Path]:
    """Each architecture with random weights, exported as a user would (TorchScript exporter, opset 17, one 224×224
    image, or an OTHER_TASKS model's own input)."""
    import torch
    import torchvision

    paths = {}
    for name in names:
        if name in OTHER_TASKS:
            build, shape = other_task(name)
            model = build().eval()
        else:
            extra = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
            model, shape = getattr(torchvision.models, name)(weights=None, **extra).eval(), (1, 3, 224, 224)
        paths[name] = directory / f"{name}.onnx"
        torch.onnx.export(model, torch.randn(*shape), str(paths[name]), opset_version=17, dynamo=False)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=[*OWN_MODELS, *OTHER_TASKS],
                        help="torchvision model builders, or OTHER_TASKS names")
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--table", type=Path, default=os.environ.get("HARNESS_BENCH_TABLE") or None,
                        help="a kernel table's folder probed on this host (default: probe now)")
    parser.add_argument("--budget-min", type=float, default=3.0, help="the probe's budget in minutes")
    parser.add_argument("--session", type=Path, help="a session that profiled these models (default: profile now)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="bench-own-models-"))
    rescore = args.table is not None and args.session is not None  # the folder holds the exports alone
    try:
        return score(args, directory, keep=not rescore)
    finally:
        if rescore:
            shutil.rmtree(directory, ignore_errors=True)


def score(args: argparse.Namespace, directory: Path, keep: bool) -> int:
    """Export, probe and profile what the arguments do not give, in `directory`, and print the figures. `keep`: the
    folder then holds a probe's table or a session made here (3–4 GB after a default probe), named in the notes, to
    score again."""
    notes = [load_note("before the runs")]
    paths = export(directory, args.models)
    probe_s = 0.0
    if args.table is None:
        started = time.monotonic()
        harness("probe", "--cpus", str(args.cpus), "--backend", "local", "--budget-min", str(args.budget_min),
                "--results-dir", str(directory / "probe"), "--name", "probe")
        probe_s = time.monotonic() - started
        args.table = directory / "probe" / "kernels" / "probe"
    table = KernelTable.load(args.table)
    if args.session is None:
        profile_runs(directory, None, [], backend="local", repeats=args.repeats, models=list(paths.values()),
                     extra_flags=["--cpus", str(args.cpus), "--no-report"])
        args.session = list_sessions(directory / "results")[-1]
    truth = headline(args.session)
    missing = [name for name in paths if name not in truth]
    if missing:
        print(f"session {args.session} holds no run of {', '.join(missing)}: give --models the models it profiled",
              file=sys.stderr)
        return 2
    notes.append(load_note("after the runs"))
    if keep:
        notes.append(f"kept for --table and --session: {directory}")
    rows, errors, inside = [], [], []
    for name, path in paths.items():
        found = predict_graph(table, path)
        error = found.ms / truth[name] - 1
        errors.append(error)
        inside.append(bool(found.low <= truth[name] <= found.high))
        carried = {kind: v["regressor"] for kind, v in found.detail["by_kind"].items() if v["regressor"] != kind}
        rows.append({"model": name, "measured ms": truth[name], "predicted ms": found.ms, "error": f"{error:+.1%}",
                     "95% interval": f"{found.low:.3g}–{found.high:.3g}",
                     "carried by another regressor": ", ".join(f"{k}: {v}" for k, v in sorted(carried.items()))})
    print_table(f"Own models, each predicted from its graph by kernel table {table.name}", rows)
    scored = shares(errors)
    summary = [{"models": len(rows), **shown(scored), "95% interval coverage": f"{np.mean(inside):.0%}",
                "table": str(args.table), "session": str(args.session), "probe min": f"{probe_s / 60:.1f}"}]
    print_table(f"{len(rows)} own models, onnxruntime, CPUS={args.cpus}, this host", summary)
    within = scored["within ±10%"]
    goals = [Goal(f"within ±10% (own models, CPUS={args.cpus})", "≥ 95%", f"{within:.0%}", within >= 0.95),
             Goal("95% interval coverage", "90–98%", f"{np.mean(inside):.0%}", bool(0.90 <= np.mean(inside) <= 0.98))]
    write_report("own_models" + ("" if args.cpus == 1 else f"-cpus{args.cpus}"), summary, goals, notes,
                 raw={"rows": rows, "table": str(args.table)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
