"""Fuzzing every device importer through `import-device`: real logs and published CSVs, mutated the ways files go
wrong (cut anywhere, lines doubled or swapped, units and numbers changed, other encodings, NUL and random bytes),
are each either imported or refused in one line naming the file, and a refused import leaves no device directory.

`make test` runs FAST_CASES per importer, derandomized so that CI draws the same cases every time; `make test-slow`
runs SLOW_CASES per importer. A failure prints the falsifying case (its bytes and the command's arguments).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.cli import build_parser
from harness.core.errors import HarnessError
from harness.device.data import device_dir, load_device
from tests.device_log_texts import (
    OLD_BENCHMARK_MODEL_LOG,
    OLD_ORT_PERF_TEST_LOG,
    benchmark_model_log,
    dumpsys_meminfo,
    jtop4_csv,
    jtop_csv,
    meter_csv,
    ort_perf_test_log,
    tegrastats_log,
)
from tests.test_device_logs import MOBILENET_OPS

FAST_CASES = 300
SLOW_CASES = 10_000
DEVICE = "fuzzed"
ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
CSV_SEEDS = sorted((ROOT / "examples").glob("*.csv")) + sorted(
    p for p in (SHARED_DATA / "ncnn").glob("ncnn_*_1t.csv"))
"""The published device CSVs under examples/ and, where the shared data sits beside the checkout, ncnn's."""
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
"""Each case's files and results directory: in memory where the host has a tmpfs, since every import fsyncs the
files it writes and thousands of fsyncs to a disk take minutes."""


@dataclass(frozen=True)
class Importer:
    """One reader's real inputs, the suffix its files get, and whether MODEL=FILE may name a file's model."""

    format: str
    seeds: tuple[str, ...]
    suffix: str = ".txt"
    model_argument: bool = True
    power: bool = False  # a power log: cases may ask for energy per inference (--inferences, --interval)


IMPORTERS = (
    Importer("benchmark_model", (
        benchmark_model_log("/data/local/tmp/mobilenet_v1_0.25_128_quant.tflite", 1369.56, ops=MOBILENET_OPS),
        benchmark_model_log("/sdcard/efficientnet-lite0.tflite", 11094.1, threads=-1, peak_mb=None),
        OLD_BENCHMARK_MODEL_LOG)),
    Importer("onnxruntime_perf_test", (ort_perf_test_log(5.123, 0.0051, 35135488), OLD_ORT_PERF_TEST_LOG)),
    Importer("tegrastats", (tegrastats_log([2448, 2460, 2501, 2455]),
                            tegrastats_log([2957, 3010, 2990], timestamps=True),
                            tegrastats_log([2957, 3010, 2990], input_mw=[5012, 4980, 5120], board="orin")),
             power=True),
    Importer("jtop_csv", (jtop_csv([2448.0, 2460.5, 2501.0]), jtop_csv([2506752.0, 2519040.0]),
                          jtop4_csv([6100, 6300, 6200], [0.0, 0.5, 1.0])), power=True),
    Importer("power_csv", (meter_csv([0.0, 0.2, 0.4, 0.6], watts=[3.0, 3.4, 3.2, 3.0]),
                           meter_csv([0.0, 0.001, 0.002], milliamps=[600.5, 640.25, 620.0])),
             suffix=".csv", power=True),
    Importer("dumpsys_meminfo", (dumpsys_meminfo(44224, 93520), dumpsys_meminfo(38112, None),
                                 dumpsys_meminfo(44224, 93520) + dumpsys_meminfo(45012, 94100))),
    Importer("csv", tuple(p.read_text(encoding="utf-8") for p in CSV_SEEDS), suffix=".csv", model_argument=False),
)

NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?")
ODD_NUMBERS = ("nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "1e308", "-1", "-0.5", "0", "0.0",
               "9" * 400, "9" * 5000, "1.2.3", ".", "e+", "-", "1,,2", ",", "", " ", "0x1F", "１２", "1_000", "+3")
"""What a damaged or hand-edited file puts where a number was."""
UNIT = re.compile(r"(?<![A-Za-z])(?:_?(?:ms|us|s|sec|mib|kb|mb|gb)|MB|kB|KB|GB|bytes|mW|W|mA|A|V)(?![A-Za-z])")
UNITS = ("ms", "us", "s", "sec", "MB", "kB", "KB", "GB", "bytes", "_ms", "_us", "_s", "_mib", "_kb", "_mb", "_gb",
         "_kib", "mW", "W", "mA", "A", "V", "mV", "µs", "")
ODD_TOKENS = ("\x00", "\ufeff", "\r", "\n", "\t", "\x0c", "\x85", "\u2028", '"', "'", ",", ";", "#", "=", "[", "]",
              "[/]", "[bold]", "[/red]", "%s", "{}", "\\", "model", "harness_model", "threads", "cpus", "repeat",
              "latency_ms", "RAM 12/34MB (lfb 1x2MB)", "** MEMINFO in pid 1 [x] **", "TOTAL PSS:", "TOTAL",
              "Graph: [", "Inference timings in us:", "Average inference time cost:", "Summary by node type",
              "Operator-wise Profiling Info for Regular Benchmark Runs", "time,RAM\n", "µs", "é", "∞", "\U0001f600",
              "POM_5V_IN 9/9", "VDD_IN 12mW/12mW", " VDD_SOC 99999mW/1mW", "Power TOT", "power cur", "Time (s)",
              "Current (mA)", "Power (W)", "2024-02-07 09:00:00.5")
"""Text that other formats, other tools, terminals and markup give a special meaning."""
ENERGY_FLAGS: list[tuple[str, ...]] = [(), ("--inferences", "40", "--interval", "100"),
                                       ("--inferences", "40", "--interval", "100", "--idle-s", "0.15")]
"""A power importer's cases: no energy asked for, energy per inference, and that above each log's idle start."""
ENCODINGS = ("utf-8-sig", "latin-1", "cp1252", "utf-16", "utf-16-le", "utf-16-be", "utf-32")


def _lines_edit(edit: Callable[[list[str], int, int], None]) -> Callable[[st.DrawFn, str], str]:
    def mutate(draw: st.DrawFn, text: str) -> str:
        lines = text.splitlines(keepends=True) or [""]
        first, second = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
        edit(lines, first, second)
        return "".join(lines)
    return mutate


def _swap(lines: list[str], first: int, second: int) -> None:
    lines[first], lines[second] = lines[second], lines[first]


def _replace_match(pattern: re.Pattern[str], replacements: tuple[str, ...]) -> Callable[[st.DrawFn, str], str]:
    def mutate(draw: st.DrawFn, text: str) -> str:
        matches = list(pattern.finditer(text))
        if not matches:
            return text
        found = draw(st.sampled_from(matches))
        return text[:found.start()] + draw(st.sampled_from(replacements)) + text[found.end():]
    return mutate


def _truncate(draw: st.DrawFn, text: str) -> str:
    return text[:draw(st.integers(0, len(text)))]


def _insert_token(draw: st.DrawFn, text: str) -> str:
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(st.sampled_from(ODD_TOKENS)) + text[at:]


MUTATIONS: tuple[Callable[[st.DrawFn, str], str], ...] = (
    _truncate,
    _lines_edit(lambda lines, first, _: lines.insert(first, lines[first])),  # a line doubled
    _lines_edit(_swap),  # two lines in each other's place
    _lines_edit(lambda lines, first, _: lines.pop(first)),  # a line lost
    _replace_match(NUMBER, ODD_NUMBERS),
    _replace_match(UNIT, UNITS),
    _insert_token,
)


@dataclass(frozen=True)
class FuzzFile:
    """One file of an import: its bytes, and whether the command names its model (MODEL=FILE)."""

    data: bytes
    named: bool


@st.composite
def fuzz_file(draw: st.DrawFn, importer: Importer) -> FuzzFile:
    """A real input of `importer` with up to five mutations; one in four in another encoding than UTF-8, one in four
with random bytes spliced in."""
    text = draw(st.sampled_from(importer.seeds))
    for _ in range(draw(st.integers(0, 5))):
        text = draw(st.sampled_from(MUTATIONS))(draw, text)
    encoding = "utf-8" if draw(st.integers(0, 3)) else draw(st.sampled_from(ENCODINGS))
    data = text.encode(encoding, errors="replace")
    for _ in range(draw(st.integers(0, 2)) if not draw(st.integers(0, 3)) else 0):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return FuzzFile(data, named=draw(st.booleans()) and importer.model_argument)


@dataclass(frozen=True)
class FuzzCase:
    """An import-device command over fuzzed files of one importer."""

    files: tuple[FuzzFile, ...]
    format_flag: bool  # --format FORMAT instead of detection
    default_model: bool  # --model NAME for the logs without MODEL=
    json: bool
    energy: tuple[str, ...] = ()  # --inferences N --interval MS (and --idle-s S): energy from a power log


def fuzz_case(importer: Importer) -> st.SearchStrategy[FuzzCase]:
    return st.builds(FuzzCase, st.lists(fuzz_file(importer), min_size=1, max_size=3).map(tuple),
                     st.booleans(), st.booleans(), st.booleans(),
                     st.sampled_from(ENERGY_FLAGS if importer.power else [()]))


def _arguments(case: FuzzCase, importer: Importer, folder: Path) -> tuple[list[str], list[Path]]:
    paths, argv = [], ["import-device"]
    for index, file in enumerate(case.files):
        path = folder / f"device_{index}{importer.suffix}"
        path.write_bytes(file.data)
        paths.append(path)
        argv.append(f"model_{index}={path}" if file.named else str(path))
    argv += ["--device", DEVICE, "--results-dir", str(folder / "results")]
    argv += ["--format", importer.format] if case.format_flag else []
    argv += ["--model", "given_model"] if case.default_model else []
    argv += ["--json"] if case.json else []
    argv += case.energy
    return argv, paths


def check_stored(results: Path) -> None:
    """A stored import reads back, no temporary file is left beside it, and every number in it is finite (a
    memory delta may be negative, nothing else)."""
    device = load_device(results, DEVICE)
    assert not [path.name for path in device_dir(results, DEVICE).iterdir() if path.name.startswith(".")]
    for metric in device.metrics:
        values = pd.to_numeric(device.table[metric], errors="raise").dropna()
        assert values.map(math.isfinite).all(), (metric, values.tolist())
        if "delta" not in metric:
            assert (values >= 0).all(), (metric, values.tolist())


def check_import(importer: Importer, case: FuzzCase) -> str | None:
    """Run the command as `harness import-device` does; it imports (None), or refuses in one line naming a file and
    writes nothing (that line)."""
    with tempfile.TemporaryDirectory(prefix="device-fuzz-", dir=SCRATCH) as folder:
        argv, paths = _arguments(case, importer, Path(folder))
        args = build_parser(argv).parse_args(argv)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                args.func(args)
        except HarnessError as err:
            message = str(err)
            assert len(message.splitlines()) == 1, message
            assert any(path.name in message for path in paths), message
            assert not (Path(folder) / "results").exists(), "a refused import left files behind"
            return message
        check_stored(Path(folder) / "results")
        if case.json:
            json.loads(out.getvalue())
        return None


FAST = settings(max_examples=FAST_CASES, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(FAST, max_examples=SLOW_CASES)


@pytest.mark.parametrize("importer", IMPORTERS, ids=lambda importer: importer.format)
@FAST
@given(data=st.data())
def test_fuzzed_device_files_import_or_fail_in_one_line(importer: Importer, data: st.DataObject) -> None:
    message = check_import(importer, data.draw(fuzz_case(importer), label="case"))
    event("imported" if message is None else "refused")  # shown by --hypothesis-show-statistics


@pytest.mark.slow
@pytest.mark.parametrize("importer", IMPORTERS, ids=lambda importer: importer.format)
@SLOW
@given(data=st.data())
def test_fuzzed_device_files_at_scale(importer: Importer, data: st.DataObject) -> None:
    message = check_import(importer, data.draw(fuzz_case(importer), label="case"))
    event("imported" if message is None else "refused")


BY_FORMAT = {importer.format: importer for importer in IMPORTERS}
SEED = {importer.format: importer.seeds[0] for importer in IMPORTERS}
LONG_CELL = "x" * 200_000


def _replaced(fmt: str, old: str, new: str) -> bytes:
    assert old in SEED[fmt], old
    return SEED[fmt].replace(old, new, 1).encode()


def _line_of(fmt: str, old: str) -> int:
    return SEED[fmt][:SEED[fmt].index(old)].count("\n") + 1


REFUSED = [  # (format, file's bytes, what its one line says): a traceback, a number stored or no line named before
    ("benchmark_model", _replaced("benchmark_model", "Inference (avg): 1369.56", "Inference (avg): 1.2.3"),
     f":{_line_of('benchmark_model', 'Inference (avg)')}: '1.2.3' is not a finite, non-negative number"),
    ("benchmark_model", _replaced("benchmark_model", "Num threads: [4]", f"Num threads: [{'9' * 5000}]"),
     f":{_line_of('benchmark_model', 'Num threads')}: '999"),
    ("benchmark_model", _replaced("benchmark_model", "\t       13\t", f"\t{'9' * 5000}\t"), ": '999"),
    ("onnxruntime_perf_test", _replaced("onnxruntime_perf_test", "cost: 0.0418 s", "cost: 1e999 s"),
     ":1: '1e999' is not a finite, non-negative number"),
    ("onnxruntime_perf_test", _replaced("onnxruntime_perf_test", "cost: 5.123 ms", "cost: -5 ms"),
     f":{_line_of('onnxruntime_perf_test', 'Average inference')}: '-5' is not a finite, non-negative number"),
    ("onnxruntime_perf_test", _replaced("onnxruntime_perf_test", "size: 35135488 bytes", f"size: {'9' * 400} bytes"),
     f":{_line_of('onnxruntime_perf_test', 'Peak working set size: ')}: '999"),
    ("tegrastats", _replaced("tegrastats", "RAM 2460/", f"RAM {'9' * 400}/"), ":2: '999"),
    ("tegrastats", _replaced("tegrastats", "RAM 2501/", f"RAM {'9' * 5000}/"), ":3: '999"),
    ("jtop_csv", _replaced("jtop_csv", ",2460.5,", ",nan,"), ":3: 'nan' is not a finite, non-negative number"),
    ("tegrastats", _replaced("tegrastats", "POM_5V_IN 2163/", f"POM_5V_IN {'9' * 400}/"), ":1: '999"),
    ("jtop_csv", _replaced("jtop_csv", ",2163,", ",-5,"), ":2: '-5' is not a finite, non-negative number"),
    ("power_csv", _replaced("power_csv", "0.2,3.4", "0.2,nan"), ":3: 'nan' is not a finite, non-negative number"),
    ("power_csv", _replaced("power_csv", "0.4,3.2", "0.1,3.2"), ":4: time 0.1 is before the line above's"),
    ("dumpsys_meminfo", _replaced("dumpsys_meminfo", "TOTAL PSS:    44224", "TOTAL PSS:    ,"),
     f":{_line_of('dumpsys_meminfo', 'TOTAL PSS:')}: ',' is not a finite"),
    ("csv", b"model,latency_ms\na,1\nb,inf\n", ":3: column latency_ms holds 'inf', not a non-negative finite number"),
    ("csv", b"model,size_gb\na,1e308\n", ":2: column size_mib holds '1e308', not a non-negative finite number"),
    ("csv", f"model,latency_ms\na,1\nb,{LONG_CELL}\n".encode(), ":3: not a CSV line (field larger than field limit"),
    ("csv", "model,latency_ms\nmobilenet_é,1\n".encode("latin-1"), ":2: not UTF-8 text (byte 0xe9 at offset 27)"),
]


@pytest.mark.parametrize(("fmt", "data", "says"), REFUSED, ids=[f"{fmt}-{i}" for i, (fmt, _, _) in enumerate(REFUSED)])
def test_inputs_fuzzing_found_are_refused_in_one_line_naming_file_and_line(fmt: str, data: bytes, says: str
                                                                            ) -> None:
    importer = BY_FORMAT[fmt]
    message = check_import(importer, FuzzCase((FuzzFile(data, named=importer.model_argument),), False, False, False))
    assert message is not None and says in message, message


IMPORTED = [  # each refused or a traceback once, though nothing is wrong with it
    ("csv", b"model,latency_ms\n[/x],3\nok[bold],4\n"),  # rich read model names as markup
    ("dumpsys_meminfo", SEED["dumpsys_meminfo"].encode("utf-16")),  # Windows PowerShell's `adb shell ... > log.txt`
    ("jtop_csv", SEED["jtop_csv"].encode("utf-32")),
]


@pytest.mark.parametrize(("fmt", "data"), IMPORTED, ids=[fmt for fmt, _ in IMPORTED])
def test_inputs_that_once_failed_import(fmt: str, data: bytes) -> None:
    assert check_import(BY_FORMAT[fmt], FuzzCase((FuzzFile(data, named=BY_FORMAT[fmt].model_argument),), False,
                                                 False, False)) is None
