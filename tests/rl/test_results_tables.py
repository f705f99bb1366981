"""Checks decided from the result tables (`rl.experiments.results_tables`)."""

from __future__ import annotations

import math

import pytest

from rl.experiments.claims import FAILS, HOLDS, UNSURE, Check
from rl.experiments.results_tables import Line, Tables, decide_check


def _tables(*lines: Line) -> Tables:
    return Tables({(line.key, line.reading): line for line in lines}, {}, {}, [])


def test_a_difference_gets_welchs_interval_and_the_claims_rule() -> None:
    check = Check("d", "diff", (("p", "cartpole", "a"), ("p", "cartpole", "b")))
    a = Line(("p", "cartpole", "a"), "paper", 100, 10_000, "", 10.0, 3.0, "")
    b = Line(("p", "cartpole", "b"), "paper", 25, 10_000, "", 9.0, 2.0, "")
    d = decide_check(check, "paper", _tables(a, b))
    half = 1.959964 * math.sqrt(9 / 100 + 4 / 25)
    assert (d.estimate, d.low, d.high) == pytest.approx((1.0, 1.0 - half, 1.0 + half), abs=1e-5)
    assert d.verdict == HOLDS and d.seeds == 25 and not d.full  # 25 seeds: below the paper's
    d = decide_check(check, "paper", _tables(a, b._replace(mean=9.5)))
    assert d.verdict == UNSURE  # the interval [-0.48, 1.48] holds 0
    assert decide_check(check, "stable", _tables(a, b)).verdict == UNSURE  # no lines there


def test_a_ratio_of_standard_deviations_gets_the_f_interval() -> None:
    check = Check("r", "ratio", (("p", "pendulum", "a"), ("p", "pendulum", "b")), "final", 1.0)
    a = Line(("p", "pendulum", "a"), "released", 100, 40_000, "", 0.0, 0.5, "")
    b = Line(("p", "pendulum", "b"), "released", 100, 40_000, "", 0.0, 1.0, "")
    d = decide_check(check, "released", _tables(a, b))
    # F(0.975; 99, 99) = 1.4862: the ratio 0.5 within [0.5 / 1.2191, 0.5 * 1.2191]
    assert (d.estimate, d.low, d.high) == pytest.approx((0.5, 0.41014, 0.60955), abs=1e-4)
    assert d.verdict == FAILS and d.full
