"""Statistics for comparing trace sets: two-sample tests, effect sizes, corrections, bootstrap.

Every function returns plain floats or ``None`` (never NaN) plus a note saying why a number is
missing, so a comparison can print "too few connections" instead of a silent NaN.

Welch's and the z-tests' p-values come from ``scipy.special``'s public t and normal functions (the ones
``scipy.stats`` itself calls, with its arithmetic step for step, so the numbers are the same to the last
bit); Fisher's exact test is computed exactly (integer binomial coefficients, one rounding at the end);
the tests only ``scipy.stats`` has (Mann-Whitney, chi-square) import it when first called. SciPy is
imported when a test first runs: importing ``scipy.stats`` costs 0.7 s of CPU, as much as a whole
``quicsm check`` run, and ``scipy.special`` 0.45 s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CORRECTIONS",
    "EDGE_TESTS",
    "MIN_SAMPLE",
    "SAMPLE_TESTS",
    "TestResult",
    "benjamini_hochberg",
    "bonferroni",
    "bootstrap_mean_ci",
    "chi_square_2x2",
    "cluster_proportion_z",
    "cohen_d",
    "correct",
    "fisher_exact",
    "hedges_g",
    "holm",
    "mann_whitney",
    "two_proportion_z",
    "welch",
]

MIN_SAMPLE = 2
"""Fewest connections per set for a two-sample test (Welch needs a variance in each set)."""


@dataclass(frozen=True, slots=True)
class TestResult:
    """One test's outcome; ``p_value`` is ``None`` when the test could not be run (see ``note``)."""

    __test__ = False  # not a pytest test class

    test: str
    statistic: float | None
    p_value: float | None
    effect_size: float | None
    effect_measure: str
    note: str = ""


def _finite(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def cohen_d(a: np.ndarray, b: np.ndarray) -> float | None:
    """(mean b - mean a) / pooled SD; ``None`` when both sets have no spread."""
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return None
    pooled = ((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2)
    if pooled <= 0:
        return None
    return float((b.mean() - a.mean()) / math.sqrt(pooled))


def hedges_g(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's d with the small-sample correction J = 1 - 3 / (4 (na + nb) - 9)."""
    d = cohen_d(a, b)
    if d is None:
        return None
    return d * (1.0 - 3.0 / (4.0 * (len(a) + len(b)) - 9.0))


def _degenerate(name: str, a: np.ndarray, b: np.ndarray, measure: str) -> TestResult | None:
    """The cases a test cannot handle, decided explicitly instead of by NaN."""
    why = None
    if len(a) < MIN_SAMPLE or len(b) < MIN_SAMPLE:
        why = f"too few connections for a test (n={len(a)} vs n={len(b)}; need {MIN_SAMPLE} each)"
    elif np.ptp(a) == 0 and np.ptp(b) == 0:
        if a[0] == b[0]:
            return TestResult(name, 0.0, 1.0, 0.0, measure, "identical constant values in both sets")
        why = f"no spread in either set ({a[0]:.4g} vs {b[0]:.4g}); a test is meaningless"
    return None if why is None else TestResult(name, None, None, None, measure, why)


def welch(a: np.ndarray, b: np.ndarray) -> TestResult:
    """Welch's unequal-variance t-test (the IMC'17 paper's test); effect size Hedges' g."""
    bad = _degenerate("welch", a, b, "hedges_g")
    if bad is not None:
        return bad
    t, p = _welch_t(b, a)
    return TestResult("welch", _finite(t), _finite(p), _finite(hedges_g(a, b)), "hedges_g")


def _sample_var(x: np.ndarray) -> np.floating:
    """Variance (ddof 1) as ``scipy.stats.ttest_ind`` takes it: the mean of squared deviations, scaled."""
    var = np.mean((x - np.mean(x, keepdims=True)) ** 2)
    n = np.float64(len(x))
    return var * (n / (n - 1))


def _welch_t(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Welch's t of mean(x) - mean(y) and its two-sided p-value, computed as ``scipy.stats.ttest_ind(x, y,
    equal_var=False)`` computes them (same operations in the same order: equal to the bit)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n1, n2 = len(x), len(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        vn1, vn2 = _sample_var(x) / n1, _sample_var(y) / n2
        df = (vn1 + vn2) ** 2 / (vn1**2 / (n1 - 1) + vn2**2 / (n2 - 1))
        if np.isnan(df):  # both variances zero: any df gives the same (undefined) answer
            df = np.float64(1.0)
        t = np.divide(np.mean(x) - np.mean(y), np.sqrt(vn1 + vn2))
    from scipy.special import stdtr

    return float(t), float(2 * stdtr(df, -np.abs(t)))


def _normal_two_sided(z: float) -> float:
    """Two-sided normal tail, as ``2 * scipy.stats.norm.sf(abs(z))``."""
    from scipy.special import ndtr

    return float(2 * ndtr(-np.asarray(abs(z))))


def mann_whitney(a: np.ndarray, b: np.ndarray) -> TestResult:
    """Two-sided Mann-Whitney U; effect size rank-biserial r = 2U_b / (na nb) - 1 (positive: b larger)."""
    bad = _degenerate("mwu", a, b, "rank_biserial")
    if bad is not None:
        return bad
    from scipy import stats as sps  # imported when first needed (seconds of start-up otherwise)

    res = sps.mannwhitneyu(b, a, alternative="two-sided")
    r = 2.0 * float(res.statistic) / (len(a) * len(b)) - 1.0
    return TestResult("mwu", _finite(res.statistic), _finite(res.pvalue), r, "rank_biserial")


SAMPLE_TESTS: dict[str, Callable[[np.ndarray, np.ndarray], TestResult]] = {"welch": welch, "mwu": mann_whitney}
"""Per-state occupancy tests by name (``--test``)."""


def _proportion_guard(name: str, ka: int, na: int, kb: int, nb: int) -> TestResult | None:
    if na == 0 or nb == 0:
        which = "first" if na == 0 else "second"
        return TestResult(
            name,
            None,
            None,
            None,
            "difference",
            f"source state never left in the {which} set; no probability to compare",
        )
    if ka == kb == 0 or (ka == na and kb == nb):
        return TestResult(
            name, None, None, 0.0, "difference", "same probability (0 or 1) in both sets; nothing to test"
        )
    return None


def two_proportion_z(ka: int, na: int, kb: int, nb: int) -> TestResult:
    """Pooled two-proportion z-test; treats every transition as independent."""
    bad = _proportion_guard("z", ka, na, kb, nb)
    if bad is not None:
        return bad
    pa, pb = ka / na, kb / nb
    p = (ka + kb) / (na + nb)
    se = math.sqrt(p * (1 - p) * (1 / na + 1 / nb))
    z = (pb - pa) / se
    return TestResult("z", z, _normal_two_sided(z), pb - pa, "difference")


def chi_square_2x2(ka: int, na: int, kb: int, nb: int) -> TestResult:
    """Pearson chi-square on the 2x2 table (taken / not taken) with Yates' correction."""
    bad = _proportion_guard("chi2", ka, na, kb, nb)
    if bad is not None:
        return bad
    from scipy import stats as sps  # imported when first needed

    table = np.array([[ka, na - ka], [kb, nb - kb]])
    chi2, p, _, _ = sps.chi2_contingency(table, correction=True)
    return TestResult("chi2", _finite(chi2), _finite(p), kb / nb - ka / na, "difference")


def _cluster_variance(k: np.ndarray, n: np.ndarray, p: float) -> float:
    """Cluster-robust variance of the ratio sum k / sum n around ``p`` (connections are the clusters)."""
    m = len(n)
    resid = k - p * n
    return m / (m - 1) * float((resid**2).sum()) / float(n.sum()) ** 2


def cluster_proportion_z(ka: np.ndarray, na: np.ndarray, kb: np.ndarray, nb: np.ndarray) -> TestResult:
    """Score z-test of two edge probabilities with connections as clusters.

    A connection takes the same edge many times, and those steps are not independent, so tests that
    count steps (pooled z, chi-square) are miscalibrated either way. Here the variance of each set's
    ratio estimate comes from the spread between its connections, with residuals taken around the
    pooled probability (the null hypothesis), as the pooled two-proportion z-test does; residuals
    around each set's own estimate rejected up to 8x too often on 11-connection real samples
    (see docs/compare.md, calibration).
    """
    sa, sb = int(na.sum()), int(nb.sum())
    bad = _proportion_guard("cluster", int(ka.sum()), sa, int(kb.sum()), sb)
    if bad is not None:
        return bad
    ma, mb = int((na > 0).sum()), int((nb > 0).sum())
    if ma < MIN_SAMPLE or mb < MIN_SAMPLE:
        return TestResult(
            "cluster",
            None,
            None,
            None,
            "difference",
            f"too few connections leave the source state (n={ma} vs n={mb}; need {MIN_SAMPLE} each)",
        )
    ka, na, kb, nb = ka[na > 0], na[na > 0], kb[nb > 0], nb[nb > 0]
    pa, pb = float(ka.sum()) / sa, float(kb.sum()) / sb
    pooled = float(ka.sum() + kb.sum()) / (sa + sb)
    se = math.sqrt(_cluster_variance(ka, na, pooled) + _cluster_variance(kb, nb, pooled))
    if se == 0:
        return TestResult(
            "cluster", None, None, 0.0, "difference", "same probability in every connection; nothing to test"
        )
    z = (pb - pa) / se
    return TestResult("cluster", z, _normal_two_sided(z), pb - pa, "difference")


def fisher_exact(ka: int, na: int, kb: int, nb: int) -> TestResult:
    """Fisher's exact test (two-sided) of ``ka`` of ``na`` units against ``kb`` of ``nb`` showing something,
    for units that are independent (connections that visit a state, not the steps of one connection);
    effect size: the difference of the shares, b - a."""
    if na == 0 or nb == 0:
        return TestResult("fisher", None, None, None, "difference", "an empty set; nothing to test")
    if not (0 <= ka <= na and 0 <= kb <= nb):
        raise ValueError(f"counts out of range: {ka}/{na} vs {kb}/{nb}")
    if not (ka + kb) or ka + kb == na + nb:  # an empty column: nothing can differ
        return TestResult("fisher", None, 1.0, kb / nb - ka / na, "difference")
    odds = ka * (nb - kb) / (kb * (na - ka)) if kb and na - ka else None  # infinite: None
    return TestResult("fisher", odds, _fisher_two_sided(ka, na, kb, nb), kb / nb - ka / na, "difference")


def _fisher_two_sided(ka: int, na: int, kb: int, nb: int) -> float:
    """The two-sided p-value of ``[[ka, na - ka], [kb, nb - kb]]``: the probability, given the margins, of
    every table at most as likely as this one (within scipy's relative 1e-14), computed with integer
    binomial coefficients and rounded once (scipy.stats.fisher_exact's definition; its floating-point
    sums agree to about 1e-15)."""
    total, shown = na + nb, ka + kb
    lo = max(0, shown - nb)
    a, b = math.comb(na, lo), math.comb(nb, shown - lo)  # C(na, x) and C(nb, shown - x), stepped exactly
    weights = []
    for x in range(lo, min(na, shown) + 1):
        weights.append(a * b)
        a, b = a * (na - x) // (x + 1), b * (shown - x) // (nb - shown + x + 1)
    seen = weights[ka - lo] * (10**14 + 1)
    tail = sum(w for w in weights if w * 10**14 <= seen)
    return min(1.0, tail / math.comb(total, shown))


EDGE_TESTS: dict[str, str] = {
    "cluster": "two-proportion score z-test, cluster-robust variance over connections",
    "z": "pooled two-proportion z-test (every transition independent)",
    "chi2": "chi-square 2x2 with Yates' correction (every transition independent)",
}
"""Per-edge probability tests by name (``--edge-test``) and what each assumes."""


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: max over j <= i of (m - j) p_(j), capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def bonferroni(pvalues: Sequence[float]) -> list[float]:
    m = len(pvalues)
    return [min(1.0, m * p) for p in pvalues]


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """BH step-up adjusted p-values (controls the false discovery rate, not the family-wise error)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i], reverse=True)
    out = [0.0] * m
    running = 1.0
    for k, i in enumerate(order):
        rank = m - k
        running = min(running, pvalues[i] * m / rank)
        out[i] = min(1.0, running)
    return out


CORRECTIONS: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "holm": holm,
    "bonferroni": bonferroni,
    "bh": benjamini_hochberg,
    "none": lambda ps: [float(p) for p in ps],
}
"""Multiple-comparison corrections by name (``--correction``)."""


def correct(pvalues: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Adjust the p-values that exist; tests that could not run stay ``None`` and are not counted."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    adjusted = CORRECTIONS[method]([float(pvalues[i]) for i in idx])  # type: ignore[arg-type]
    out: list[float | None] = [None] * len(pvalues)
    for i, q in zip(idx, adjusted):
        out[i] = q
    return out


BOOTSTRAP_MAX_N = 20_000
"""Connections in a set above which the CI of a mean is the normal one (mean +- z sd / sqrt(n)), not
the bootstrap's: resampling costs ``resamples`` x n draws (2 x 10^6 connections kept compare busy for
minutes), and from this n on the two differ by about 10^-4 of a share (Beta(2,5) shares, n = 20,000:
5e-5 to 1.5e-5 against a width of 4.4e-3), under the 0.1 points the reports print."""


def _normal_mean_ci(x: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import ndtri

    half = float(ndtri(0.5 + confidence / 2.0)) * x.std(0, ddof=1) / np.sqrt(len(x))
    mean = x.mean(0)
    return np.maximum(mean - half, x.min(0)), np.minimum(mean + half, x.max(0))


def bootstrap_mean_ci(
    x: np.ndarray, *, resamples: int = 2000, confidence: float = 0.95, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the column means of ``x`` (connections x states); above
    :data:`BOOTSTRAP_MAX_N` connections the normal interval, which the bootstrap's converges to.

    Each resample draws n row indices uniformly with replacement (``rng.integers``), counts them with one
    ``bincount`` over a block of resamples and takes the weighted means as a float matrix product (BLAS).
    The counts are multinomial(n, 1/n), the classic bootstrap; drawing them as binomial chains
    (``rng.multinomial``) cost 5-6x more. Blocks of about 2**19 draws keep memory small whatever n is;
    the draws follow each other in the seeded stream, so a seed gives the same interval every time.
    """
    n, s = x.shape
    if n == 0:
        nan = np.full(s, np.nan)
        return nan, nan
    if n == 1 or resamples <= 0:
        return x.mean(0), x.mean(0)
    xf = np.asarray(x, np.float64)
    if n > BOOTSTRAP_MAX_N:
        return _normal_mean_ci(xf, confidence)
    means = np.empty((resamples, s))
    chunk = max(1, min(resamples, (1 << 19) // n))
    offsets = np.arange(chunk, dtype=np.int64)[:, None] * n
    for start in range(0, resamples, chunk):
        k = min(resamples, start + chunk) - start
        idx = rng.integers(0, n, size=(k, n), dtype=np.int64)
        idx += offsets[:k]
        counts = np.bincount(idx.ravel(), minlength=k * n).reshape(k, n)
        np.matmul(counts.astype(np.float64), xf, out=means[start : start + k])
    means /= n
    tail = (1.0 - confidence) / 2.0
    return np.quantile(means, tail, axis=0), np.quantile(means, 1.0 - tail, axis=0)
