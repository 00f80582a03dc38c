"""The package imports, exposes its API, and rejects bad calls with useful messages.

The calls made in this process fail before regulation starts (bad values are checked first), so
they leave no process-wide state behind; the rest run in fresh interpreters."""

import inspect
import math

import pytest

import tact


def test_api_exists_and_is_documented():
    for name in ["testpoint", "set_priority", "stats", "flush", "configure", "Regulator"]:
        obj = getattr(tact, name)
        assert callable(obj), name
        assert obj.__doc__ and len(obj.__doc__) > 40, name
        assert name in tact.__all__
    assert "testpoint" in tact.__doc__
    assert set(tact.Stats.__annotations__) >= {"phase", "suspensions", "suspended", "waited"}
    assert str(inspect.signature(tact.testpoint)) == "(index, *metrics)"
    assert tact.stats() is None, "nothing regulated in this process"


@pytest.mark.parametrize(
    "metrics, message",
    [
        ((math.nan,), "metric 0 of index 0 is NaN: progress must be a finite number >= 0"),
        ((1, -2.5), "metric 1 of index 0 is -2.5"),
        ((math.inf,), "metric 0 of index 0 is inf"),
        ((), "index 0 was given no metrics"),
    ],
)
def test_bad_progress_raises_value_error(metrics, message):
    with pytest.raises(ValueError, match=message):
        tact.testpoint(0, *metrics)


def test_bad_arguments():
    with pytest.raises(ValueError, match="index -1 is out of range"):
        tact.testpoint(-1, 1)
    with pytest.raises(TypeError, match="metric 1 must be a number .* not str"):
        tact.testpoint(0, 1, "2")
    with pytest.raises(ValueError, match="testpoint=\"fast\" is not a duration"):
        tact.configure(testpoint="fast")
    with pytest.raises(ValueError, match="testpoint period must be greater than zero"):
        tact.configure(testpoint=0)
    with pytest.raises(TypeError, match="max_suspension must be a duration"):
        tact.configure(max_suspension=[1])
    # Named in the caller's terms, not the regulator's (initial suspension, suspension cap).
    with pytest.raises(ValueError, match=r"testpoint = 2h: outside 1ms\.\.60s"):
        tact.configure(testpoint="2h")
    with pytest.raises(
        ValueError, match=r"max_suspension = 10ms: must be at least the testpoint period \(100ms\)"
    ):
        tact.configure(testpoint="100ms", max_suspension="10ms")
    with pytest.raises(ValueError, match="bootstrap = -1: must not be negative"):
        tact.configure(bootstrap=-1)
    assert tact.stats() is None, "failed calls start nothing"


def test_metric_count_is_kept_per_index_across_threads(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", state_dir=STATE)
        tact.testpoint(0, 1)
        errors = []
        def call(*metrics):
            try:
                tact.testpoint(0, *metrics)
            except ValueError as e:
                errors.append(str(e))
        call(1, 2)
        t = threading.Thread(target=call, args=(3, 4, 5))
        t.start(); t.join()
        tact.testpoint(1, 1, 2)      # another index may have another count
        call(7)                      # the first count still works
        try:
            tact.configure(testpoint="50ms")
        except RuntimeError as e:
            errors.append(str(e))
        report(errors=errors, stats=tact.stats())
        """
    )
    assert out["errors"][0] == "index 0 was given 2 metrics, but earlier 1"
    assert out["errors"][1] == "index 0 was given 3 metrics, but earlier 1"
    assert "call configure() before the first testpoint" in out["errors"][2]
    assert len(out["errors"]) == 3
    assert out["stats"]["phase"] == "bootstrap"


def test_durations_and_disabled(run_py):
    out = run_py(
        """
        from datetime import timedelta
        tact.configure(testpoint=timedelta(milliseconds=30), max_suspension=5.0, disabled=True)
        for _ in range(1000):
            tact.testpoint(0, 1)
        errors = []
        try:
            tact.testpoint(0, float("nan"))
        except ValueError as e:
            errors.append(str(e))
        with tact.Regulator() as r:
            r.testpoint(0, 1)
            regulator = r.stats()
        report(stats=tact.stats(), regulator=regulator, errors=errors)
        """
    )
    assert out == {
        "stats": None,
        "regulator": None,
        "errors": ["metric 0 of index 0 is NaN: progress must be a finite number >= 0"],
    }
