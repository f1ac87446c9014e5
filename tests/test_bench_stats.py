"""bench.stats against textbook values, hand computations and brute force."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from bench.stats import a12, iqr, mann_whitney_u, median, quantile, ranks


def test_median_and_quartiles_interpolate_between_ranks_as_numpy_does() -> None:
    assert median([4, 1, 3, 2]) == 2.5
    assert median([7]) == 7
    assert iqr([1, 2, 3, 4]) == (1.75, 3.25)
    assert quantile([10, 20, 30], 0.0) == 10 and quantile([10, 20, 30], 1.0) == 30


def test_quantile_of_an_empty_sample_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^quantile of an empty sample$"):
        median([])


def test_tied_values_share_the_mean_of_their_ranks() -> None:
    assert ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert ranks([5, 5, 5]) == [2, 2, 2]


def test_mann_whitney_matches_the_scipy_documentation_example_exactly() -> None:
    # scipy.stats.mannwhitneyu docs (after Mann & Whitney 1947): males vs females ages,
    # U1 = 17, exact two-sided p = 0.1111 (14 of the C(9, 4) = 126 arrangements are as extreme).
    result = mann_whitney_u([19, 22, 16, 29, 24], [20, 11, 17, 12])
    assert (result.u1, result.u2, result.method) == (17, 3, "exact")
    assert result.p == pytest.approx(14 / 126)


def test_exact_p_values_equal_brute_force_enumeration_of_all_arrangements() -> None:
    rng = random.Random(5)
    for n1, n2 in [(1, 1), (2, 3), (3, 3), (4, 5), (6, 4)]:
        values = rng.sample(range(1000), n1 + n2)
        x, y = values[:n1], values[n1:]
        observed = mann_whitney_u(x, y)
        extreme = 0
        total = 0
        for chosen in itertools.combinations(range(n1 + n2), n1):
            xs = [values[i] for i in chosen]
            ys = [values[i] for i in range(n1 + n2) if i not in chosen]
            u = sum(a > b for a in xs for b in ys)
            total += 1
            extreme += abs(u - n1 * n2 / 2) >= abs(observed.u1 - n1 * n2 / 2)
        assert observed.method == "exact"
        assert observed.p == pytest.approx(min(1.0, extreme / total))


def test_ties_use_the_normal_approximation_with_tie_and_continuity_corrections() -> None:
    # By hand: pooled ranks x = 1, 3, 3, 5.5 -> R1 = 12.5, U1 = 12.5 - 10 = 2.5, mean 8;
    # tie groups of 3 (value 2) and 2 (value 3): sum(t^3 - t) = 24 + 6 = 30;
    # var = 4 * 4 / 12 * (9 - 30 / 56); z = (|2.5 - 8| - 0.5) / sqrt(var) = 1.4884.
    result = mann_whitney_u([1, 2, 2, 3], [2, 3, 4, 5])
    var = 16 / 12 * (9 - 30 / 56)
    z = 5.0 / math.sqrt(var)
    assert result.method == "normal" and result.u1 == 2.5
    assert result.p == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert result.p == pytest.approx(0.13666, abs=1e-4)


def test_samples_censored_at_the_same_cap_show_no_difference() -> None:
    assert mann_whitney_u([60.0] * 10, [60.0] * 10).p == 1.0


def test_large_separated_samples_are_highly_significant() -> None:
    fast = [0.1 * i for i in range(1, 31)]
    slow = [10 + 0.1 * i for i in range(1, 31)]
    result = mann_whitney_u(fast, slow)
    assert result.method == "normal" and result.u1 == 0 and result.p < 1e-9


def test_a12_is_the_probability_of_being_larger_with_ties_halved() -> None:
    assert a12([3, 4], [1, 2]) == 1.0
    assert a12([1, 2], [3, 4]) == 0.0
    assert a12([5, 5], [5, 5]) == 0.5
    # Vargha & Delaney: A = U1 / (n1 n2).
    x, y = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    assert a12(x, y) == pytest.approx(mann_whitney_u(x, y).u1 / 20)
    assert a12(x, y) + a12(y, x) == pytest.approx(1.0)
