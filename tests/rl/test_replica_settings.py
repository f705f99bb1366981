"""Validation of per-replica agent settings (`rl.agents.replica_settings`)."""

import dataclasses

import numpy as np
import pytest

from rl.agents.replica_settings import check_replica_settings, replica_config


@dataclasses.dataclass(frozen=True)
class _Config:
    alpha0: float = 0.1
    rank: int = 4
    signed: bool = False
    label: str = "x"


def test_values_take_the_type_of_the_config_field():
    arrays = check_replica_settings(
        "Agent", {"alpha0", "rank"}, _Config(), {"alpha0": [0.1, 0.2], "rank": [2, 4]}, 2
    )
    assert arrays["alpha0"].dtype == np.float64 and arrays["rank"].dtype == np.int64
    assert replica_config(_Config(), arrays, 1) == _Config(alpha0=0.2, rank=4)
    assert replica_config(_Config(), {}, 0) is not None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"label": ["a", "b"]}, "cannot vary 'label' per replica \\(a field of its config\\)"),
        ({"alpha": [0.1, 0.2]}, "not a field of its config"),
        ({"alpha0": [0.1]}, "must be 2 numbers"),
        ({"alpha0": [0.1, float("nan")]}, "must be finite"),
        ({"alpha0": ["a", "b"]}, "must be numbers"),
        ({"rank": [2, 2.5]}, "must be ints. Got \\[2.0, 2.5\\]"),
    ],
)
def test_bad_settings_are_refused_in_one_line(settings, message):
    with pytest.raises(ValueError, match=message) as error:
        check_replica_settings("Agent", {"alpha0", "rank"}, _Config(), settings, 2)
    assert "\n" not in str(error.value)


def test_no_settings_is_no_arrays():
    assert check_replica_settings("Agent", (), _Config(), None, 3) == {}


@dataclasses.dataclass(frozen=True)
class _IntWritten:
    epsilon_start: float = 1  # a float field whose value is written as an int


def test_a_float_field_written_as_an_int_keeps_fractional_values():
    arrays = check_replica_settings(
        "Agent", {"epsilon_start"}, _IntWritten(), {"epsilon_start": [0.5, 1.0]}, 2
    )
    np.testing.assert_array_equal(arrays["epsilon_start"], [0.5, 1.0])
