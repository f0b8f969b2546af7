"""Statistics: Holm/BH against brute force, tests and effect sizes against definitions, degenerate cases."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from quicsm.compare.stats import (
    benjamini_hochberg,
    bootstrap_mean_ci,
    chi_square_2x2,
    cluster_proportion_z,
    cohen_d,
    correct,
    fisher_exact,
    hedges_g,
    holm,
    mann_whitney,
    two_proportion_z,
    welch,
)

pvals = st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=7)


def holm_closed_testing(ps: list[float]) -> list[float]:
    """Holm = closed testing with Bonferroni local tests: adjusted p_i = max over S containing i of |S| min_S p."""
    m = len(ps)
    out = []
    for i in range(m):
        worst = 0.0
        others = [j for j in range(m) if j != i]
        for k in range(m):
            for rest in itertools.combinations(others, k):
                s = (i, *rest)
                worst = max(worst, min(1.0, len(s) * min(ps[j] for j in s)))
        out.append(worst)
    return out


@settings(max_examples=200, deadline=None)
@given(pvals)
def test_holm_equals_closed_testing_brute_force(ps: list[float]) -> None:
    assert holm(ps) == pytest.approx(holm_closed_testing(ps), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(pvals, st.sampled_from([0.001, 0.01, 0.05, 0.1]))
@example([0.0003333333333333334, 1.0, 1.0], 0.001)  # alpha / 3 < this p, 3 * p <= alpha
def test_holm_rejections_match_the_step_down_procedure(ps: list[float], alpha: float) -> None:
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    rejected = set()
    for k, i in enumerate(order):
        if (m - k) * ps[i] <= alpha:  # the arithmetic holm() does: at the boundary, alpha / (m - k) rounds apart
            rejected.add(i)
        else:
            break
    assert {i for i, q in enumerate(holm(ps)) if q <= alpha} == rejected


@settings(max_examples=200, deadline=None)
@given(pvals, st.sampled_from([0.01, 0.05, 0.1]))
@example([0.0, 0.0, 0.05], 0.05)
def test_bh_rejections_match_the_step_up_procedure(ps: list[float], alpha: float) -> None:
    m = len(ps)
    srt = sorted(ps)
    # srt[r-1] * m / r <= alpha, as benjamini_hochberg() computes it: r * alpha / m rounds apart at the
    # boundary (ps = [0, 0, 0.05], alpha = 0.05: 3 * 0.05 / 3 > 0.05)
    k = max((r for r in range(1, m + 1) if srt[r - 1] * m / r <= alpha), default=0)
    expected = {i for i, p in enumerate(ps) if k and p <= srt[k - 1]}
    assert {i for i, q in enumerate(benjamini_hochberg(ps)) if q <= alpha} == expected


def test_correct_skips_tests_that_did_not_run() -> None:
    out = correct([0.01, None, 0.02], "holm")
    assert out[1] is None
    assert out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.02)  # m = 2, not 3


def test_welch_matches_the_textbook_formula_and_hedges_g() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.1, 0.05, 9), rng.normal(0.2, 0.1, 13)
    r = welch(a, b)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (b.mean() - a.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    assert r.statistic == pytest.approx(t)
    assert r.p_value == pytest.approx(2 * sps.t.sf(abs(t), df))
    sp = math.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))
    d = (b.mean() - a.mean()) / sp
    assert cohen_d(a, b) == pytest.approx(d)
    assert r.effect_size == pytest.approx(hedges_g(a, b)) and r.effect_size == pytest.approx(d * (1 - 3 / (4 * 22 - 9)))
    assert r.effect_size > 0


def test_mann_whitney_rank_biserial_sign_and_extremes() -> None:
    a, b = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.5, 0.6, 0.7])
    r = mann_whitney(a, b)
    assert r.effect_measure == "rank_biserial" and r.effect_size == pytest.approx(1.0)
    assert mann_whitney(b, a).effect_size == pytest.approx(-1.0)
    assert 0 < r.p_value < 0.1


@pytest.mark.parametrize("fn", [welch, mann_whitney])
def test_degenerate_inputs_give_notes_not_nan(fn) -> None:
    few = fn(np.array([0.3]), np.array([0.1, 0.2, 0.3]))
    assert few.p_value is None and "too few connections" in few.note
    same = fn(np.zeros(4), np.zeros(5))
    assert same.p_value == 1.0 and "identical" in same.note
    flat = fn(np.full(4, 0.2), np.full(5, 0.7))
    assert flat.p_value is None and "no spread" in flat.note


def test_proportion_tests_agree_with_scipy_and_each_other() -> None:
    z = two_proportion_z(30, 100, 50, 100)
    table = np.array([[30, 70], [50, 50]])
    chi2_plain = sps.chi2_contingency(table, correction=False)[0]
    assert z.statistic**2 == pytest.approx(chi2_plain)
    assert z.effect_size == pytest.approx(0.2)
    c = chi_square_2x2(30, 100, 50, 100)
    assert c.p_value == pytest.approx(sps.chi2_contingency(table, correction=True)[1])
    none = two_proportion_z(0, 0, 3, 10)
    assert none.p_value is None and "never left" in none.note


def test_cluster_z_is_wider_than_pooled_z_when_connections_differ() -> None:
    # every connection either always or never takes the edge: 100 steps carry 10 connections' worth of evidence
    na = np.full(10, 10)
    ka = np.array([10, 10, 10, 0, 0, 0, 0, 0, 0, 10])
    kb = np.array([10, 10, 10, 10, 0, 0, 0, 0, 10, 10])
    pooled = two_proportion_z(int(ka.sum()), 100, int(kb.sum()), 100)
    clustered = cluster_proportion_z(ka, na, kb, na)
    assert clustered.p_value > pooled.p_value * 5
    assert clustered.effect_size == pytest.approx(pooled.effect_size)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    x = np.random.default_rng(0).uniform(size=(40, 3))
    lo1, hi1 = bootstrap_mean_ci(x, resamples=500, rng=np.random.default_rng(7))
    lo2, hi2 = bootstrap_mean_ci(x, resamples=500, rng=np.random.default_rng(7))
    lo3, hi3 = bootstrap_mean_ci(x, resamples=500, rng=np.random.default_rng(8))
    assert np.array_equal(lo1, lo2) and np.array_equal(hi1, hi2)
    assert not np.array_equal(lo1, lo3)  # the seed is used
    assert np.all(lo1 < x.mean(0)) and np.all(x.mean(0) < hi1)
    se = x.std(0, ddof=1) / math.sqrt(40)
    assert np.allclose(hi1 - lo1, 2 * 1.96 * se, rtol=0.25)


def _exact_bootstrap_quantile(x: np.ndarray, q: float) -> tuple[float, float]:
    """The q-quantile of the bootstrap mean's exact distribution (all n**n index draws), and how far q lies
    from the nearest step of its CDF (a sampled quantile is only certain away from the steps)."""
    n = len(x)
    means = sorted(sum(x[list(i)]) / n for i in itertools.product(range(n), repeat=n))
    values, counts = np.unique(np.round(means, 12), return_counts=True)
    cdf = np.cumsum(counts) / n**n
    k = int(np.searchsorted(cdf, q))
    return float(values[k]), float(np.min(np.abs(cdf - q)))


def test_bootstrap_draws_the_multinomial_bootstrap_distribution() -> None:
    """The resamples are the classic bootstrap: n draws with replacement, counts multinomial(n, 1/n). On 4
    values whose 256 equally likely resamples give 31 distinct means, the sampled quantiles at many levels
    are the exact distribution's atoms; a wrong resampler (Poisson counts, draws without replacement, an
    off-by-one index range) puts the tails elsewhere."""
    x = np.array([0.0, 1.0, 4.0, 13.0])
    checked = 0
    for confidence in np.linspace(0.10, 0.96, 44):
        lo, hi = bootstrap_mean_ci(x[:, None], resamples=40_000, confidence=confidence, rng=np.random.default_rng(3))
        tail = (1 - confidence) / 2
        for q, got in ((tail, lo[0]), (1 - tail, hi[0])):
            want, gap = _exact_bootstrap_quantile(x, q)
            if gap > 0.006:  # > 4 standard errors of a 40,000-draw quantile from any step of the CDF
                assert got == pytest.approx(want), (q, got, want)
                checked += 1
    assert checked >= 40


def test_bootstrap_columns_share_their_resamples() -> None:
    """Every column of a resample uses the same connections (the weights are per connection): a column and
    its negation give mirrored intervals."""
    x = np.random.default_rng(1).gamma(2.0, size=(300, 1))
    lo, hi = bootstrap_mean_ci(np.hstack([x, -x, 2 * x]), resamples=999, rng=np.random.default_rng(5))
    assert lo[1] == pytest.approx(-hi[0]) and hi[1] == pytest.approx(-lo[0])
    assert (lo[2], hi[2]) == (pytest.approx(2 * lo[0]), pytest.approx(2 * hi[0]))


def test_bootstrap_covers_the_true_mean_at_its_level() -> None:
    """Coverage over 400 seeded samples of 60 connections from three known distributions (a skewed one, a
    uniform share, a 0/1 column): the percentile interval's coverage is near its 95% (binomial SE 0.011;
    the percentile bootstrap is a little short on skewed data at this n)."""
    rng = np.random.default_rng(11)
    truth = np.array([2.0 / 3.0, 0.5, 0.3])  # gamma(2, 1/3), uniform, Bernoulli(0.3)
    hits = np.zeros(3)
    trials = 400
    for i in range(trials):
        x = np.column_stack([rng.gamma(2.0, 1.0 / 3.0, 60), rng.uniform(size=60), rng.random(60) < 0.3])
        lo, hi = bootstrap_mean_ci(x.astype(float), resamples=1000, rng=np.random.default_rng([11, i]))
        hits += (lo <= truth) & (truth <= hi)
    coverage = hits / trials
    assert np.all(coverage >= 0.90) and np.all(coverage <= 0.98), coverage


@pytest.mark.parametrize("n", [2_000, 200_001])
def test_bootstrap_width_is_the_normal_approximation_at_large_n(n: int) -> None:
    """At large n the bootstrap distribution of a mean is normal with SD sigma / sqrt(n): the 95% interval is
    2 x 1.96 standard errors wide and centred on the mean. n = 200,001 takes 2 resamples per block and an odd
    last block."""
    rng = np.random.default_rng(n)
    x = np.column_stack([rng.normal(5.0, 2.0, n), rng.exponential(1.0, n)])
    lo, hi = bootstrap_mean_ci(x, resamples=1999 if n < 10_000 else 301, rng=np.random.default_rng(0))
    se = x.std(0) / math.sqrt(n)
    tol = 0.08 if n < 10_000 else 0.2  # the tails of 301 resamples are rougher
    assert np.allclose(hi - lo, 2 * 1.96 * se, rtol=tol), (hi - lo) / (2 * 1.96 * se)
    assert np.all(np.abs((lo + hi) / 2 - x.mean(0)) < 0.3 * se)


def _bits(x: float | None) -> bytes:
    return np.float64(np.nan if x is None else x).tobytes()


@pytest.mark.parametrize("seed", range(1))
def test_welch_and_z_p_values_are_scipy_stats_own_to_the_bit(seed: int) -> None:
    """Welch's and the z-tests' p-values (now from scipy.special, so scipy.stats is not imported at start-up)
    equal scipy.stats' to the last bit: compare's JSON does not move. Random sizes, scales (occupancy shares,
    microsecond durations), a set without spread, ties, near-identical samples."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(150):
        na, nb = (int(n) for n in rng.integers(2, 400, size=2))
        scale = float(10.0 ** rng.uniform(-6, 7))
        a, b = rng.gamma(rng.uniform(0.2, 5), scale, na), rng.normal(scale, scale * rng.uniform(0.01, 3), nb)
        cases.append((a, b))
    cases += [
        (np.array([0.2, 0.2, 0.2]), np.array([0.1, 0.3, 0.5, 0.5])),
        (np.round(rng.random(50), 1), np.round(rng.random(9), 1)),
    ]
    cases.append((1.0 + 1e-15 * rng.random(20), 1.0 + 1e-15 * rng.random(30)))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's note on near-identical samples
        for a, b in cases:
            ours, ref = welch(a, b), sps.ttest_ind(b, a, equal_var=False)
            assert _bits(ours.statistic) == _bits(float(ref.statistic)), (a, b)
            assert _bits(ours.p_value) == _bits(float(ref.pvalue)), (a, b)
    for _ in range(1000):
        na, nb = (int(n) for n in rng.integers(1, 10**6, size=2))
        ka, kb = int(rng.integers(0, na + 1)), int(rng.integers(0, nb + 1))
        res = two_proportion_z(ka, na, kb, nb)
        if res.p_value is not None:
            assert _bits(res.p_value) == _bits(float(2 * sps.norm.sf(abs(res.statistic))))
    for _ in range(150):
        m = int(rng.integers(2, 60))
        na, nb = rng.integers(0, 50, size=m), rng.integers(0, 50, size=m)
        ka, kb = rng.binomial(na, rng.random()), rng.binomial(nb, rng.random())
        res = cluster_proportion_z(ka, na, kb, nb)
        if res.p_value is not None:
            assert _bits(res.p_value) == _bits(float(2 * sps.norm.sf(abs(res.statistic))))


def test_fisher_p_values_are_exact_and_scipy_stats_own() -> None:
    """Fisher's exact test (check's new/gone items) is the exact probability of the tables at most as
    likely, rounded once, and scipy.stats.fisher_exact's to its float error: small and large tables, empty
    rows/columns, ties at the mode; its odds ratio is scipy's."""
    rng = np.random.default_rng(7)
    tables = [(k, n, j, m) for n in range(1, 5) for m in range(1, 5) for k in range(n + 1) for j in range(m + 1)]
    for top in (300, 3000):
        for _ in range(75):
            na, nb = (int(x) for x in rng.integers(1, top, size=2))
            tables.append((int(rng.integers(0, na + 1)), na, int(rng.integers(0, nb + 1)), nb))
            tables.append((int(rng.integers(0, 3)), na, int(rng.integers(0, 3)), nb))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for ka, na, kb, nb in tables:
            ours, ref = fisher_exact(ka, na, kb, nb), sps.fisher_exact([[ka, na - ka], [kb, nb - kb]])
            assert ours.p_value == pytest.approx(float(ref.pvalue), rel=1e-12, abs=1e-300), (ka, na, kb, nb)
            if na + nb <= 600:  # the oracle's binomials are slow on the largest tables
                assert ours.p_value == float(_exact_fisher(ka, na, kb, nb)), (ka, na, kb, nb)
            assert _bits(ours.statistic) == _bits(_finite(ref.statistic)), (ka, na, kb, nb)


def _exact_fisher(ka: int, na: int, kb: int, nb: int) -> Fraction:
    """The oracle: every table with the same margins, as exact fractions."""
    n = ka + kb
    if n in (0, na + nb):
        return Fraction(1)
    probs = {
        x: Fraction(math.comb(na, x) * math.comb(nb, n - x), math.comb(na + nb, n))
        for x in range(max(0, n - nb), min(na, n) + 1)
    }
    limit = probs[ka] * (1 + Fraction(1, 10**14))
    return min(Fraction(1), sum((p for p in probs.values() if p <= limit), Fraction(0)))


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def test_large_sets_get_the_normal_interval_in_linear_time() -> None:
    """Past BOOTSTRAP_MAX_N connections the CI is mean +- z sd/sqrt(n) (2 x 10^6 connections spent
    minutes resampling); it is where the bootstrap's ends up, within its Monte Carlo error."""
    import time

    from quicsm.compare.stats import BOOTSTRAP_MAX_N, bootstrap_mean_ci

    rng = np.random.default_rng(3)
    x = rng.beta(2, 5, size=(50 * BOOTSTRAP_MAX_N, 2))
    started = time.process_time()
    lo, hi = bootstrap_mean_ci(x, resamples=2000, rng=np.random.default_rng(0))
    assert time.process_time() - started < 5
    half = 1.959964 * x.std(0, ddof=1) / np.sqrt(len(x))
    assert np.allclose(lo, x.mean(0) - half) and np.allclose(hi, x.mean(0) + half)
    small = x[:BOOTSTRAP_MAX_N]
    blo, bhi = bootstrap_mean_ci(small, resamples=2000, rng=np.random.default_rng(0))
    nlo, nhi = bootstrap_mean_ci(np.vstack([small, small[:1]]), resamples=2000, rng=np.random.default_rng(0))
    assert np.all(np.abs(blo - nlo) < 3e-4) and np.all(np.abs(bhi - nhi) < 3e-4)
