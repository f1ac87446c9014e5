"""The statistics FuzzBench and Magma report for repeated fuzzing trials, in pure Python.

- `median`, `quantile`, `iqr`: order statistics with linear interpolation between closest ranks
  (numpy's default, Hyndman-Fan type 7), so figures match what a reader's numpy would say.
- `mann_whitney_u`: the two-sided Mann-Whitney U test. Exact (the null distribution of U counted
  by dynamic programming) when there are no ties and both samples are small; otherwise the normal
  approximation with tie correction and continuity correction, as scipy's `asymptotic` method.
  Time-to-bug samples censored at a cap are full of ties, which is why the tie correction matters.
- `a12`: the Vargha-Delaney effect size, P(X > Y) + P(X = Y) / 2.

No scipy: the benchmark must run wherever racefuzz runs. Nothing here knows about fuzzing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

EXACT_MAX = 20  # exact p-values when both samples have at most this many values and no ties


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1), linearly interpolated between closest ranks."""
    if not values:
        raise ValueError("quantile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within 0..1, not {q}")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> tuple[float, float]:
    """(first quartile, third quartile)."""
    return quantile(values, 0.25), quantile(values, 0.75)


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks starting at 1; tied values share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


@dataclass(frozen=True)
class MannWhitney:
    u1: float  # U of the first sample: pairs (x, y) with x > y, ties counting one half
    u2: float  # n1 * n2 - u1
    p: float  # two-sided
    method: str  # "exact" or "normal"


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> MannWhitney:
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    pooled = [*x, *y]
    r = ranks(pooled)
    u1 = sum(r[:n1]) - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    tied = len(set(pooled)) < len(pooled)
    if not tied and max(n1, n2) <= EXACT_MAX:
        return MannWhitney(u1, u2, _exact_p(round(max(u1, u2)), n1, n2), "exact")
    return MannWhitney(u1, u2, _normal_p(u1, n1, n2, pooled), "normal")


def _normal_p(u1: float, n1: int, n2: int, pooled: Sequence[float]) -> float:
    n = n1 + n2
    counts: dict[float, int] = {}
    for v in pooled:
        counts[v] = counts.get(v, 0) + 1
    ties = sum(t**3 - t for t in counts.values())
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0  # every value is the same: no evidence of any difference
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return min(1.0, max(0.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


@cache
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the C(n1+n2, n1) arrangements give U = 0, 1, ..., n1*n2 (no ties)."""
    # f(n1, n2, u) = f(n1 - 1, n2, u - n2) + f(n1, n2 - 1, u): is the largest value an x or a y.
    if n1 == 0 or n2 == 0:
        return (1,)
    with_x = _u_counts(n1 - 1, n2)
    with_y = _u_counts(n1, n2 - 1)
    out = [0] * (n1 * n2 + 1)
    for u, c in enumerate(with_y):
        out[u] += c
    for u, c in enumerate(with_x):
        out[u + n2] += c
    return tuple(out)


def _exact_p(u_max: int, n1: int, n2: int) -> float:
    counts = _u_counts(n1, n2)
    upper = sum(counts[u_max:])  # P(U >= the larger U), doubled: the distribution is symmetric
    return min(1.0, 2 * upper / math.comb(n1 + n2, n1))


def a12(x: Sequence[float], y: Sequence[float]) -> float:
    """Vargha-Delaney A: the probability that a value of x is larger than one of y, ties halved.

    0.5 means no difference; 0.56, 0.64 and 0.71 are the conventional small, medium and large
    effect thresholds (Vargha & Delaney 2000).
    """
    if not x or not y:
        raise ValueError("A12 needs two non-empty samples")
    greater = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    return greater / (len(x) * len(y))
