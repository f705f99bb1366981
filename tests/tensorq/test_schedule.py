import numpy as np
import pytest

from tensorq import StepSchedule


def test_values():
    schedule = StepSchedule(0.1, 0.001)
    assert schedule(0) == pytest.approx(0.1)
    assert schedule(1000) == pytest.approx(0.05)
    assert isinstance(schedule(3), float)
    np.testing.assert_allclose(schedule(np.array([0, 1000, 3000])), [0.1, 0.05, 0.025])


def test_constant_when_kappa_is_zero():
    np.testing.assert_array_equal(StepSchedule(0.005, 0.0)(np.arange(5)), np.full(5, 0.005))


@pytest.mark.parametrize(
    ("args", "name"), [((0.0, 0.1), "alpha0"), ((-1.0, 0.1), "alpha0"), ((0.1, -1.0), "kappa")]
)
def test_rejects_bad_parameters(args, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        StepSchedule(*args)


def test_rejects_negative_time():
    with pytest.raises(ValueError, match="'t'"):
        StepSchedule(0.1, 0.1)(-1)
