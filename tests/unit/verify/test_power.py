"""The breaker tiers' sample-size check: when a scenario's outcome is a coin toss, INCONCLUSIVE."""
from __future__ import annotations

import math
import random

import pytest

from chaos.env.model import BreakerPolicy
from chaos.verify.breaker import binom_cdf
from chaos.verify.power import calls_needed, judgeable, reach_probability, tier_judgeable, wrong_outcome


def test_random_failures_at_half_the_tier_reach_it_in_a_quarter_of_200_call_windows():
    # P(X >= 2), X ~ Binomial(200, 0.005): the false trips the issue saw on a no-trip scenario
    exact = 1 - 0.995 ** 200 - 200 * 0.005 * 0.995 ** 199
    assert reach_probability(200, 0.005, 0.01, "random") == pytest.approx(exact, rel=1e-9)
    assert reach_probability(200, 0.005, 0.01, "random") == pytest.approx(0.2642, abs=1e-4)


def test_an_even_spread_decides_the_suites_scenarios_at_min_calls():
    assert reach_probability(200, 0.005, 0.01, "even") == 0.0   # 1 failure of 200: 0.5 %
    assert reach_probability(200, 0.015, 0.01, "even") == 1.0   # 3 of 200: 1.5 %
    assert reach_probability(200, 0.04, 0.03, "even") == 1.0    # 8 of 200: 4 %
    # where floor and ceil straddle the threshold, a window catches the ceiling that often
    assert reach_probability(150, 0.01, 0.01, "even") == pytest.approx(0.5)  # 1 or 2 of 150: 2 needed
    assert reach_probability(250, 0.0102, 0.0104, "even") == pytest.approx(0.55)


def test_the_log_space_binomial_matches_the_exact_sum_and_a_simulation():
    for n, p, k in [(50, 0.04, 2), (200, 0.005, 2), (400, 0.015, 6), (1000, 0.01, 15)]:
        assert reach_probability(n, p, k / n, "random") == pytest.approx(1 - binom_cdf(k - 1, n, p), abs=1e-9)
    rng = random.Random(7)
    hits = sum(sum(rng.random() < 0.005 for _ in range(200)) >= 2 for _ in range(4000))
    assert abs(hits / 4000 - reach_probability(200, 0.005, 0.01, "random")) < 0.025
    assert 0.0 <= reach_probability(50_000, 0.005, 0.01, "random") < 1e-12  # no overflow at large n


def test_random_failures_need_many_more_calls_and_the_message_says_how_many():
    why = judgeable(200, 0.005, 0.01, expect_reach=False, spread="random", alpha=0.01)
    assert why is not None and why.startswith("INCONCLUSIVE:") and "26.4%" in why and "\n" not in why
    need = calls_needed(0.005, 0.01, expect_reach=False, spread="random", alpha=0.01, start=200)
    assert need is not None and f"it needs {need} calls per window" in why
    assert wrong_outcome(need, 0.005, 0.01, expect_reach=False, spread="random") <= 0.01
    before = need - 1 if need <= 1000 else math.ceil(need / 1.05)
    assert wrong_outcome(before, 0.005, 0.01, expect_reach=False, spread="random") > 0.01
    assert judgeable(need, 0.005, 0.01, expect_reach=False, spread="random", alpha=0.01) is None


def test_more_windows_make_a_false_trip_likelier_and_a_missed_trip_rarer():
    one = wrong_outcome(400, 0.005, 0.01, expect_reach=False, spread="random")
    three = wrong_outcome(400, 0.005, 0.01, expect_reach=False, windows=3, spread="random")
    assert three == pytest.approx(1 - (1 - one) ** 3) and three > one
    miss1 = wrong_outcome(400, 0.015, 0.01, expect_reach=True, spread="random")
    assert wrong_outcome(400, 0.015, 0.01, expect_reach=True, windows=3, spread="random") == pytest.approx(miss1 ** 3)


@pytest.mark.parametrize("fraction,expect", [(0.005, "none"), (0.015, "degrade"), (0.04, "rollback")])
def test_the_breaker_suite_scenarios_are_judgeable_on_local_and_not_with_random_failures(fraction, expect):
    policy = BreakerPolicy()  # the seed's tiers: 1 % degrade, 3 % rollback, 200 min_calls
    assert tier_judgeable(policy, fraction, expect, 230, 20.0, "even") is None
    assert tier_judgeable(policy, fraction, expect, 230, 20.0, "random").startswith("INCONCLUSIVE:")
    with pytest.raises(ValueError):
        tier_judgeable(policy, fraction, "sideways", 230, 20.0)


def test_inconclusive_has_its_own_report_category():
    from chaos.report.results_dir import CATEGORIES

    cat = next(c for c in CATEGORIES if c["name"].startswith("Inconclusive"))
    assert cat["matchedStatuses"] == ["skipped"] and "INCONCLUSIVE" in cat["messageRegex"]
