"""The thesis's quantitative model b(i,p), f(i,p) (T§4.4), as tact-core implements it
(crates/tact-core/src/idle/model.rs, spec idletime.md §4, with the spec's clamps): the benchmark
feeds it the rig's measured τ, r(i) and r_max and draws its prediction beside the measurement.
Kept in step with the Rust model by the self-test's hand-checked cases, which are the Rust unit
tests' cases."""


def predict(i, r_i, p, tau, r_max, t_max=0.1, alpha=1.0, anchor="end", think=0.0):
    """(f_n, b_n): fg normalised by r(i), bg by r_max, for intensity i, PI p (seconds), service
    time tau (s), fg baseline r_i = r(i) and r_max = r(1) (requests per second)."""
    if not 0.0 <= i <= 1.0:
        raise ValueError(f"intensity must be in [0, 1], got {i}")
    if i == 0.0:
        return 1.0, 1.0
    # A start-anchored PI up to τ has expired before its request ends (a priority queue);
    # end-anchored, only one up to the fg think time does.
    if p <= (tau if anchor == "start" else think):
        b = r_max - r_i / 2.0
    elif p > t_max:
        b = 0.0
    else:
        s = (1.0 - i) * t_max
        if s < 1e-9:
            b = 0.0
        else:
            lost = p - tau if anchor == "start" else p
            b = max(0.0, r_max - r_i) * max(0.0, (s - lost) / s)
    f = min(r_max - b, r_i) * (alpha if b > 0 else 1.0)
    return (f / r_i if r_i > 0 else 1.0), b / r_max


def self_test():
    close = lambda a, b: abs(a - b) < 1e-9  # noqa: E731
    # the Rust unit tests' disk: τ 20 ms, r_max 50/s, r(i) = 50 i
    f, b = predict(0.4, 20.0, 0.010, 0.020, 50.0, anchor="start")
    assert close(f, 0.5) and close(b, 0.8), (f, b)
    f, b = predict(0.2, 10.0, 0.040, 0.020, 50.0, anchor="start")
    assert close(b * 50, 30.0) and close(f, 1.0), (f, b)
    f, b = predict(0.2, 10.0, 0.040, 0.020, 50.0, anchor="end")
    assert close(b * 50, 20.0), (f, b)
    assert close(predict(0.5, 25.0, 0.020, 0.020, 50.0, alpha=0.9, anchor="start")[0], 0.45)
    assert close(predict(0.5, 25.0, 0.021, 0.020, 50.0, alpha=0.9, anchor="start")[0], 0.9)
    assert predict(0.7, 35.0, 0.080, 0.020, 50.0, anchor="start")[1] == 0.0
    assert predict(1.0, 50.0, 0.030, 0.020, 50.0, anchor="start") == (1.0, 0.0)
    assert predict(0.5, 25.0, 0.2, 0.020, 50.0) == (1.0, 0.0)
