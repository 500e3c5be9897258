"""Significance-aware ranks: real differences order models, indistinguishable ones share a rank."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from harness.analysis.pair_tests import (
    GREATER,
    benjamini_hochberg,
    holm,
    mannwhitney_p,
    reaches,
    repeats_to_reach,
    signed_rank_p,
    smallest_mannwhitney_p,
    tied_exact_p,
)
from harness.analysis.ranking import (
    ALPHA,
    FAILED,
    MANN_WHITNEY,
    MIN_RELATIVE_GAP,
    PARTIAL,
    RANKED,
    SIGNED_RANK,
    compare,
    pairwise_tests,
    rank_runs,
    rank_samples,
)
from harness.cli import main
from harness.core.records import RunRecord
from harness.store.results import SessionStore
from tests.analysis_fixtures import write_session


def by_model(entries):
    return {e.model: e for e in entries}


def test_separated_models_get_distinct_ranks_with_exact_p_values() -> None:
    samples = {"fast": [1.0, 1.1, 1.2, 1.05, 1.15], "mid": [2.0, 2.1, 2.2, 2.05, 2.15],
               "slow": [3.0, 3.2, 3.1, 3.3, 3.4]}
    entries = rank_samples(samples)
    assert [(e.model, e.rank) for e in entries] == [("fast", 1), ("mid", 2), ("slow", 3)]
    # Completely separated 5 vs 5: the exact two-sided p is 2 / C(10, 5).
    assert by_model(entries)["mid"].p_value == pytest.approx(2 / math.comb(10, 5))
    # Benjamini–Hochberg over the 2 neighbour pairs: two equal p-values stay as they are.
    assert by_model(entries)["mid"].p_adjusted == pytest.approx(2 / math.comb(10, 5))
    assert "slower in every run of it against each of fast's (5 + 5 repeats)" in by_model(entries)["mid"].reason
    assert by_model(entries)["mid"].compared_with == "fast" and by_model(entries)["slow"].compared_with == "mid"
    assert all(e.stability == 1.0 for e in entries)


def test_indistinguishable_models_share_a_rank_and_ranks_skip() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 8).tolist(), rng.normal(10, 1, 8).tolist()
    p = stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
    assert p > ALPHA  # the premise: these two really are not distinguishable
    entries = by_model(rank_samples({"a": a, "b": b, "c": (np.array(a) + 20).tolist()}))
    assert entries["a"].rank == entries["b"].rank == 1
    assert entries["c"].rank == 3  # competition ranking: the shared first place takes places 1 and 2
    tied = [entries["a"], entries["b"]]
    assert [e.p_value for e in tied if e.p_value is not None] == [pytest.approx(p)]
    # Both stay within places 1..2 in every resample, since c is far away.
    assert all(e.stability == 1.0 and 1 <= e.position_low <= e.position_high <= 2 for e in tied)


def test_close_models_have_unstable_positions() -> None:
    rng = np.random.default_rng(11)
    samples = {"a": rng.normal(10.0, 1, 6).tolist(), "b": rng.normal(10.3, 1, 6).tolist()}
    entries = rank_samples(samples)
    assert entries[0].rank == entries[1].rank == 1
    assert (entries[0].position_low, entries[0].position_high) == (1, 2)


@pytest.mark.parametrize(("a", "b"), [([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), ([10.0, 10.0], [12.0, 12.0])])
def test_a_test_that_cannot_reach_alpha_ties_and_says_how_many_repeats_would_do(a, b) -> None:
    """3 + 3 repeats can never give p ≤ 0.05 (the smallest exact p is 0.1): no fallback may order them anyway."""
    assert smallest_mannwhitney_p(3, 3) == pytest.approx(0.1) and smallest_mannwhitney_p(4, 4) < ALPHA
    pair = compare(a, b)
    assert not pair.separated and pair.p_value is None
    assert f"with {len(a)} + {len(b)} repeats Mann–Whitney cannot reach p ≤ {ALPHA:g}" in pair.reason
    assert [e.rank for e in rank_samples({"a": a, "b": b})] == [1, 1]
    # The figure given is enough: that many repeats, as cleanly apart, separate the two.
    needed = pair.repeats_needed
    assert needed is not None and smallest_mannwhitney_p(needed, needed) < ALPHA
    assert f"about {needed} repeats per model would separate them" in pair.reason
    spread = np.linspace(0.0, 0.5, needed)
    assert compare((min(a) + spread).tolist(), (max(b) + spread).tolist()).separated


def test_a_single_repeat_supports_no_order() -> None:
    entries = rank_samples({"a": [1.0], "b": [2.0]})
    assert [e.rank for e in entries] == [1, 1]
    assert "with 1 + 1 repeats Mann–Whitney cannot reach" in entries[1].reason


def test_tiers_are_transitive_a_tie_with_the_leader_is_not_enough() -> None:
    """A = 10, B = 10.5, C = 11.5: A-B and B-C are under the 10% gap, A-C is not. Ranking C below A alone while it
    ties with B (A 1, B 1, C 3) would say "B ~ C" and "C is worse than B's rank" at once: all three share rank 1."""
    noise = [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    samples = {name: [centre + e for e in noise] for name, centre in (("A", 10.0), ("B", 10.5), ("C", 11.5))}
    tests = pairwise_tests(samples, ["A", "B", "C"], every_pair=True)
    assert tests["A", "C"].separated and not tests["A", "B"].separated and not tests["B", "C"].separated
    entries = by_model(rank_samples(samples))
    assert [entries[m].rank for m in "ABC"] == [1, 1, 1]
    assert entries["C"].compared_with == "B" and "medians 9.5% apart, under 10%" in entries["C"].reason
    # A fourth model far from all three opens the next tier, at competition rank 4.
    samples["D"] = [20.0 + e for e in noise]
    assert by_model(rank_samples(samples))["D"].rank == 4


def test_every_order_the_ranking_states_is_a_separated_pair() -> None:
    """Random sessions of 6 models: a model ranks below its neighbour above only if their pair was separated, so
    every neighbour pair the tests could not separate shares a rank."""
    rng = np.random.default_rng(0)
    tiers_seen = []
    for _ in range(12):
        samples = {f"m{i}": rng.lognormal(np.log(rng.uniform(1, 3)), 0.08, int(rng.integers(5, 12))).tolist()
                   for i in range(6)}
        entries = rank_samples(samples)
        tests = pairwise_tests(samples, [e.model for e in entries])
        rank = {e.model: e.rank for e in entries}
        assert len(tests) == len(samples) - 1  # the neighbours only
        for (better, worse), pair in tests.items():
            assert pair.separated == (rank[better] != rank[worse]), (better, worse, pair.reason)
        tiers_seen.append(len(set(rank.values())))
    assert min(tiers_seen) < max(tiers_seen) and max(tiers_seen) >= 3  # the property was tested on real orders


def test_models_cleanly_apart_separate_however_many_are_ranked() -> None:
    """Four models 4 repeats each, all cleanly apart (p = 2/70 = 0.029 a pair). Holm over the six pairs multiplied
    the smallest p by 6 and separated nothing; the three neighbour pairs, FDR-adjusted, each keep 0.029, and a pair
    whose every run lies apart separates by itself: four ranks."""
    samples = {f"m{i}": [10.0 * 2**i + e for e in (0.0, 0.1, 0.2, 0.3)] for i in range(4)}
    tests = pairwise_tests(samples, sorted(samples))
    assert sorted(tests) == [("m0", "m1"), ("m1", "m2"), ("m2", "m3")]
    assert all(t.p_value == pytest.approx(2 / 70) and t.p_adjusted == pytest.approx(2 / 70) and t.separated
               for t in tests.values())
    assert [e.rank for e in rank_samples(samples)] == [1, 2, 3, 4]


def test_benjamini_hochberg_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(4)
    for size in (1, 2, 5, 9):
        p = rng.uniform(0, 0.2, size)
        assert benjamini_hochberg(p) == pytest.approx(multipletests(p, method="fdr_bh")[1])


def test_holm_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(1).uniform(0, 0.2, 12)
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1])


def test_tied_values_get_the_exact_permutation_p_not_the_normal_approximation() -> None:
    """[10]*4 against [12]*4: the tie-corrected normal p is 0.013, below what 4 + 4 repeats can give (2/70)."""
    assert stats.mannwhitneyu([10.0] * 4, [12.0] * 4).pvalue < smallest_mannwhitney_p(4, 4)
    assert compare([10.0] * 4, [12.0] * 4).p_value == pytest.approx(2 / 70)
    rng = np.random.default_rng(8)
    for n1, n2 in [(3, 5), (4, 4), (5, 5), (6, 7), (8, 8)]:
        a, b = np.round(rng.normal(0, 1, n1)), np.round(rng.normal(0.7, 1, n2))  # whole numbers: many ties
        scipy_p = stats.mannwhitneyu(a, b, method=stats.PermutationMethod(n_resamples=np.inf)).pvalue
        assert tied_exact_p(a, b) == pytest.approx(scipy_p, rel=1e-9)



def test_the_one_sided_test_asks_whether_the_first_sample_is_larger() -> None:
    """`greater` is scipy's one-sided exact p, tied values included; 3 + 3 fully separated runs give 1/20, which
    reaches alpha = 0.05 (a level-alpha test rejects at p <= alpha), where the two-sided 1/10 cannot."""
    slow, fast = [2.0, 2.1, 2.2], [1.0, 1.1, 1.2]
    assert mannwhitney_p(slow, fast, GREATER) == pytest.approx(1 / math.comb(6, 3))
    assert smallest_mannwhitney_p(3, 3, GREATER) == pytest.approx(0.05) and reaches(0.05, ALPHA)
    assert not reaches(smallest_mannwhitney_p(3, 3), ALPHA) and not reaches(None, ALPHA)
    assert mannwhitney_p(fast, slow, GREATER) == pytest.approx(1.0)  # the other direction: no evidence at all
    assert repeats_to_reach(ALPHA, alternative=GREATER) == 3 and repeats_to_reach(ALPHA) == 4
    rng = np.random.default_rng(5)
    for n1, n2 in [(3, 3), (3, 5), (4, 4), (6, 5)]:
        a, b = rng.normal(0.8, 1, n1), rng.normal(0, 1, n2)
        assert mannwhitney_p(a, b, GREATER) == pytest.approx(
            stats.mannwhitneyu(a, b, alternative="greater", method="exact").pvalue, rel=1e-9)
        a, b = np.round(a), np.round(b)  # whole numbers: ties
        scipy_p = stats.mannwhitneyu(a, b, alternative="greater",
                                     method=stats.PermutationMethod(n_resamples=np.inf)).pvalue
        assert tied_exact_p(a, b, GREATER) == pytest.approx(scipy_p, rel=1e-9)

def session_runs(model: str, statuses: list[str], values: list[float]) -> list[RunRecord]:
    values_iter = iter(values)
    return [RunRecord.from_dict({
        "model_name": model, "cpus": 1.0, "run_id": f"{model}-{i}", "status": status,
        "latency_stats_ms": {"p50": (v := next(values_iter)), "headline": v} if status == "ok" else None})
        for i, status in enumerate(statuses)]


def test_failed_and_partly_failed_models_are_listed_not_dropped_or_flattered() -> None:
    runs = (session_runs("steady", ["ok"] * 5, [2.0, 2.1, 2.2, 2.3, 2.4])
            + session_runs("other", ["ok"] * 5, [4.0, 4.1, 4.2, 4.3, 4.4])
            + session_runs("flaky", ["ok", "oom", "ok", "oom", "ok"], [1.0, 1.1, 1.2])
            + session_runs("dead", ["oom"] * 3 + ["timeout"] * 2, []))
    (entries,) = rank_runs(runs, "latency_ms").values()
    by_name = by_model(entries)
    assert [e.model for e in entries] == ["steady", "other", "dead", "flaky"]
    assert [by_name[m].rank for m in ("steady", "other")] == [1, 2] and by_name["steady"].status == RANKED
    # flaky's three surviving runs are the fastest of all, yet it takes no rank.
    flaky = by_name["flaky"]
    assert (flaky.rank, flaky.status, flaky.n, flaky.runs, flaky.median) == (None, PARTIAL, 3, 5, 1.1)
    assert flaky.statuses == "ok=3;oom=2" and "3 of 5 runs ok (oom=2)" in flaky.reason
    dead = by_name["dead"]
    assert (dead.rank, dead.status, dead.n, dead.median) == (None, FAILED, 0, None)
    assert dead.reason == "no ok run (oom=3;timeout=2)"


def test_rank_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    # 7 rounds: the fewest in which the paired test can reach 0.05 (2/2^7); slow and slow_too are under 10% apart
    latencies = {"fast": [1.0, 1.1, 1.2, 1.05, 1.15, 1.12, 1.08], "slow": [3.0, 3.2, 3.1, 3.3, 3.35, 3.15, 3.22],
                 "slow_too": [3.1, 3.0, 3.25, 3.2, 3.15, 3.28, 3.05]}
    write_session(results, latencies, cpus=1.0)
    assert main(["rank", "--results-dir", str(results), "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    ranks = {row["model"]: row["rank"] for row in result["ranking"]}
    assert ranks == {"fast": 1, "slow": 2, "slow_too": 2}
    reasons = {row["model"]: row["reason"] for row in result["ranking"]}
    assert "slower in every round side by side (7 rounds side by side): a chance of 0.016" in reasons["slow_too"]
    assert "Wilcoxon signed-rank p = " in reasons["slow"] and "under 10%" in reasons["slow"]
    medians = {row["model"]: row["median"] for row in result["ranking"]}
    assert medians == {m: pytest.approx(float(np.median(v))) for m, v in latencies.items()}
    assert main(["rank", "--results-dir", str(results), "--metric", "runtime_s"]) == 2
    assert "no ok run reported runtime_s" in capsys.readouterr().err


def test_rank_command_says_why_models_tie_how_many_repeats_would_separate_them_and_lists_failures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    session = write_session(results, {"fast": [1.0, 1.1, 1.2], "slow": [3.0, 3.1, 3.2], "close": [3.1, 3.2, 3.3]},
                            cpus=1.0)
    store = SessionStore(results, session.name)
    for repeat in range(3):
        store.append_run({"session_id": session.name, "run_id": f"big-{repeat}", "model_name": "big", "cpus": 1.0,
                          "status": "oom", "repeat": repeat})
    assert main(["rank", "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    text = " ".join(out.split())
    assert "slow shares rank 1 with fast: with 3 rounds side by side Wilcoxon signed-rank cannot reach p ≤ 0.05" in text
    needed = compare([1.0, 1.1, 1.2], [3.0, 3.1, 3.2], alpha=ALPHA / 2,  # the first step over 2 neighbour pairs
                     paired=True).repeats_needed
    assert f"about {needed} repeats per model would separate them" in text
    assert "close shares rank 1 with slow:" in text and "under 10%: no number of repeats separates them" in text
    assert "big (failed): no ok run (oom=3)" in text
    assert "more repeats could separate" in " ".join(err.split())


def test_a_significant_but_tiny_gap_ties() -> None:
    """Identical models measured apart by a consistent 1% (as an A/A run shows) must not be ranked apart."""
    a = [100.0, 100.1, 100.2, 100.3, 100.4, 100.5]
    b = [x * 1.01 + 0.5 for x in a]
    assert stats.mannwhitneyu(a, b, alternative="two-sided").pvalue < ALPHA  # the test alone would split them
    pair = compare(a, b)
    assert not pair.separated and pair.p_value < ALPHA and f"under {MIN_RELATIVE_GAP:.0%}" in pair.reason
    assert pair.repeats_needed is None
    assert [e.rank for e in rank_samples({"a": a, "b": b})] == [1, 1]
    c = [x * (1 + 2 * MIN_RELATIVE_GAP) for x in a]
    assert compare(a, c).separated is True


def test_models_measured_side_by_side_are_compared_round_by_round() -> None:
    """The host drifts between rounds (here 8 rounds from 10 to 80), and B is 20% slower than A in every round: the
    runs overlap, so the unpaired test sees no order, while the differences, round by round, all point one way."""
    drift = [10.0 * r for r in range(1, 9)]
    a, b = drift, [x * 1.2 for x in drift]
    assert not compare(a, b).separated and compare(a, b).test == MANN_WHITNEY
    pair = compare(a, b, paired=True)
    assert pair.separated and pair.test == SIGNED_RANK and pair.p_value == pytest.approx(2 / 2**8)
    rounds = {"a": list(range(8)), "b": list(range(8))}
    assert [e.rank for e in rank_samples({"a": a, "b": b}, rounds=rounds)] == [1, 2]
    # A model with a round fewer (a failed run) or more (adaptive repeats) is paired over the rounds both ran: 7 of
    # them, still every one slower; runs of different sessions share no round and are compared unpaired.
    assert [e.rank for e in rank_samples({"a": a[:7], "b": b}, rounds={"a": rounds["a"][:7], "b": rounds["b"]})] \
        == [1, 2]
    assert [e.rank for e in rank_samples({"a": a, "b": b}, rounds={"a": [("s1", r) for r in range(8)],
                                                                   "b": [("s2", r) for r in range(8)]})] == [1, 1]


def test_the_paired_test_holds_alpha_where_runs_of_one_round_are_not_independent() -> None:
    """Identical models; the run that comes second in a round is slower (a position effect, the order shuffled
    per round as a session shuffles it) and the host drifts between rounds. Then the two models' runs of a round
    are pulled apart, the unpaired test's "independent draws" is false, and it calls identical models different
    too often; swapping a round's two runs is still as likely as what was seen, which the paired test rests on."""
    rng = np.random.default_rng(5)
    sessions, rounds = 2000, 8
    calls = {"paired": 0, "unpaired": 0}
    for _ in range(sessions):
        drift = 10.0 + np.cumsum(rng.normal(0.0, 0.2, rounds))
        a_second = rng.integers(0, 2, rounds).astype(bool)
        a = drift * np.where(a_second, 1.3, 1.0) * rng.lognormal(0.0, 0.02, rounds)
        b = drift * np.where(a_second, 1.0, 1.3) * rng.lognormal(0.0, 0.02, rounds)
        # the p-values compare(..., paired=True) and compare() use
        calls["paired"] += reaches(signed_rank_p(b - a), ALPHA)
        calls["unpaired"] += reaches(mannwhitney_p(a, b), ALPHA)
    tolerance = 3 * math.sqrt(ALPHA * (1 - ALPHA) / sessions)
    assert calls["paired"] / sessions <= ALPHA + tolerance
    assert calls["unpaired"] / sessions > ALPHA + tolerance, calls


def test_the_signed_rank_p_is_exact_with_ties_and_zeros() -> None:
    """scipy's exact p where it has one (no ties); with tied and zero differences, every sign pattern counted."""
    rng = np.random.default_rng(2)
    for n in (5, 6, 8, 10):
        d = rng.normal(0.3, 1, n)
        assert signed_rank_p(d) == pytest.approx(stats.wilcoxon(d, method="exact").pvalue, rel=1e-9)
    d = np.array([1.0, -1.0, 2.0, 2.0, 3.0, 0.0, -2.0, 4.0])
    nonzero = d[d != 0]
    ranks = stats.rankdata(np.abs(nonzero))
    observed = ranks[nonzero > 0].sum()
    sums = np.array([ranks[list(signs)].sum() for signs in itertools.product([False, True], repeat=nonzero.size)])
    expected = min(1.0, 2 * min(np.mean(sums <= observed + 1e-9), np.mean(sums >= observed - 1e-9)))
    assert signed_rank_p(d) == pytest.approx(expected)


def test_five_rounds_cannot_separate_and_the_rounds_said_would() -> None:
    """5 rounds side by side never give p ≤ 0.05 (2/2^5); the count the tie names does, with runs as far apart."""
    a, b = [10.0, 11.0, 12.0, 13.0, 14.0], [13.0, 14.5, 15.0, 16.8, 17.0]
    pair = compare(a, b, paired=True)
    assert pair.p_value is None and not pair.separated
    assert "with 5 rounds side by side Wilcoxon signed-rank cannot reach p ≤ 0.05 (its smallest p is 0.062)" \
        in pair.reason
    needed = pair.repeats_needed
    assert needed is not None and needed >= 6
    steps = np.linspace(10.0, 14.0, needed)
    assert compare(steps.tolist(), (steps * 1.25).tolist(), paired=True).separated


def _side_by_side(centres: list[float], rounds: int, rng: np.random.Generator, noise: float = 0.05,
                  position_effect: float = 0.0) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """One simulated session: every model once a round, in a shuffled order; the host drifts between rounds, each
    run has its own lognormal noise, and a run's place in its round slows it by `position_effect` per place (one
    run slowing the next)."""
    drift = np.exp(np.cumsum(rng.normal(0.0, 0.05, rounds)))
    samples: dict[str, list[float]] = {f"m{i}": [] for i in range(len(centres))}
    for r in range(rounds):
        places = rng.permutation(len(centres))
        for i, centre in enumerate(centres):
            samples[f"m{i}"].append(float(centre * drift[r] * (1 + position_effect * places[i])
                                          * rng.lognormal(0.0, noise)))
    return samples, {name: list(range(rounds)) for name in samples}


@pytest.mark.parametrize(("models", "noise", "position_effect"), [(2, 0.05, 0.0), (2, 0.02, 0.3), (2, 0.3, 0.0),
                                                                   (6, 0.1, 0.1)])
def test_a_a_identical_models_tie_at_least_95_percent_of_the_time(models: int, noise: float,
                                                                  position_effect: float) -> None:
    """The A/A property at the default REPEATS: the same model under several names, measured side by side, shares
    one rank in at least 95% of sessions, with quiet or noisy runs, and where the second run of a round is slower
    (the case that made the unpaired test call identical models different)."""
    rng = np.random.default_rng(7)
    sessions = 1500
    tied = 0
    for _ in range(sessions):
        samples, rounds = _side_by_side([10.0] * models, 7, rng, noise, position_effect)
        order = sorted(samples, key=lambda m: float(np.median(samples[m])))
        tied += not any(t.separated for t in pairwise_tests(samples, order, rounds=rounds).values())
    assert tied / sessions >= 0.95, tied / sessions


def test_ten_models_1_3_times_apart_at_7_repeats_get_at_least_five_ranks() -> None:
    """Each model 1.3x slower than the one before, 7 rounds side by side with drift and 10% noise per run: Holm over
    45 pairs put all ten at rank 1 (2/2^7 can never pass 0.05/45); the neighbour pairs separate most of them."""
    rng = np.random.default_rng(1)
    distinct = []
    for _ in range(30):
        samples, rounds = _side_by_side([1.3**i for i in range(10)], 7, rng, noise=0.1)
        distinct.append(len({e.rank for e in rank_samples(samples, rounds=rounds)}))
    assert min(distinct) >= 5, distinct


def test_three_real_models_2x_apart_separate_at_the_default_repeats(tmp_path: Path, in_tmp_cwd: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Real runs on this host at every default (REPEATS, ITERATIONS, ...): three ONNX models, each about twice the
    work of the one before, get three ranks."""
    from harness.core.config import VARIABLES
    from tests.conftest import make_matmul_model

    models = [make_matmul_model(tmp_path / f"mlp{size}.onnx", size=size, layers=4) for size in (512, 724, 1024)]
    results = tmp_path / "results"
    assert main(["profile", *map(str, models), "--backend", "local", "--results-dir", str(results), "--json"]) == 0
    capsys.readouterr()
    assert main(["rank", "--results-dir", str(results), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["ranking"]
    least, most = (int(VARIABLES[name][3]) for name in ("REPEATS", "MAX_REPEATS"))
    assert all(least <= row["runs"] <= most for row in rows), rows  # the defaults, with adaptive repeats
    assert [(row["model"], row["rank"]) for row in rows] == [("mlp512", 1), ("mlp724", 2), ("mlp1024", 3)], \
        [(row["model"], row["median"], row["reason"]) for row in rows]
