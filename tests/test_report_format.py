"""How report numbers read, which models are non-dominated, and when an axis goes logarithmic."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.report.answer import non_dominated
from harness.report.figures import log_if_wide
from harness.report.format import column_label, display_frame, mib, sig, with_interval


def test_three_significant_digits_without_exponents_where_people_read() -> None:
    assert [sig(v) for v in (0.8794, 0.5704, 56.33, 1234.5, 0.000123, 2.0, 12, np.int64(7))] == \
        ["0.879", "0.570", "56.3", "1,230", "0.000123", "2.00", "12", "7"]
    assert sig(None) == sig(float("nan")) == "—" and sig("ok") == "ok" and sig(True) == "True"
    assert with_interval(0.5704, 0.51, 0.612) == "0.570 [0.510, 0.612]" and with_interval(1.0, None, 2.0) == "1.00"


def test_units_go_in_the_labels_and_memory_is_never_bytes() -> None:
    assert column_label("latency_p50_ms_median") == "latency p50 median (ms)"
    assert column_label("peak_memory_mib") == "peak memory (MiB)" and column_label("runtime_s") == "runtime (s)"
    assert mib(2147483648) == "2 GiB" and mib(512 * 1024**2) == "512 MiB" and mib(1536 * 1024**2) == "1.50 GiB"
    shown = display_frame(pd.DataFrame({"model": ["a"], "load_s": [0.041234]}))
    assert list(shown.columns) == ["model", "load (s)"] and shown.iloc[0, 1] == "0.0412"


def test_non_dominated_models() -> None:
    frame = pd.DataFrame({"latency": [1.0, 2.0, 0.5, 2.0, 1.0], "memory": [50.0, 40.0, 60.0, 45.0, 50.0]})
    # Row 3 is beaten by row 1 on memory at equal latency; rows 0 and 4 are equal, so neither dominates the other.
    assert non_dominated(frame).tolist() == [True, True, True, False, True]
    # 0.25% less memory is noise (under the ranking's 10% minimum factor): twice the latency is not.
    close = pd.DataFrame({"latency": [1.0, 2.0], "memory": [40.0, 39.9]})
    assert non_dominated(close).tolist() == [True, False]
    assert non_dominated(close, tolerance=0.0).tolist() == [True, True]


def test_log_axis_only_where_values_span_more_than_ten_times() -> None:
    ax = Figure().add_subplot()
    assert log_if_wide(ax, "x", [0.5, 3.0, 42.0]) and ax.get_xscale() == "log"
    assert not log_if_wide(ax, "y", [40.0, 65.0]) and ax.get_yscale() == "linear"
    assert not log_if_wide(ax, "y", [0.0, 100.0])  # a log axis cannot show zero
