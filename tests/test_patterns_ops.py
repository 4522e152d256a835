"""Specification of the operations / security patterns (``cep.patterns.ops``) and their generators.

Every pattern, on both engines:

* finds exactly the incidents its generator injected, for several seeds, and none of the
  near misses (one error too few, the last error just after the window, an error burst
  with no deploy before it, failed logins split by a success, a success too late, ...);
* is made of expressions only, so ``engine="auto"`` picks numba and the pattern survives
  ``Pattern.to_json()`` / ``Pattern.from_json()`` with the same results.

The scenarios below spell out what a match holds: ``error_burst_after_deploy`` takes the
deploy and the first N errors after it (reported at the N-th, once per deploy);
``failed_logins_then_success`` takes the run of failures less than the window before the
success, and the success (reported at the success, once per run).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from support import dataset
from support import run_dataset as run
from support import stage_ids as stages

import cep
from cep import Matcher
from cep.patterns.ops import error_burst_after_deploy, failed_logins_then_success
from cep.patterns.synthetic import found
from cep.patterns.synthetic.ops import deploy_logs, login_events

ENGINES = ("reference", "numba")
SEEDS = (0, 1, 7)
SEC = 1_000
MIN = 60_000



# ================================================================== library contract


def test_the_background_comes_close() -> None:
    """The background is not trivially clean: with a lower count the patterns find more
    than the injected incidents (one-too-few near misses, typos before a login)."""
    logs = dataset(deploy_logs, SEEDS[0])
    assert len(run(logs, error_burst_after_deploy(errors=4), "numba")) > len(logs.episodes)
    logins = dataset(login_events, SEEDS[0])
    assert (
        len(run(logins, failed_logins_then_success(failures=2), "numba")) > len(logins.episodes) + 5
    )


def test_generators_follow_the_pattern_parameters() -> None:
    cases = [
        (
            error_burst_after_deploy(errors=3, within=5 * MIN),
            deploy_logs(seed=3, errors=3, within=5 * MIN),
        ),
        (
            error_burst_after_deploy(errors=8, within=timedelta(minutes=30)),
            deploy_logs(seed=4, errors=8, within=timedelta(minutes=30)),
        ),
        (
            failed_logins_then_success(failures=3, within=2 * MIN),
            login_events(seed=3, failures=3, within=2 * MIN),
        ),
        (
            failed_logins_then_success(failures=10, within=timedelta(hours=1)),
            login_events(seed=4, failures=10, within=timedelta(hours=1)),
        ),
    ]
    for pattern, ds in cases:
        for engine in ENGINES:
            assert found(run(ds, pattern, engine)) == set(ds.episodes)


def test_generator_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="errors"):
        deploy_logs(errors=1)
    with pytest.raises(ValueError, match="within"):
        deploy_logs(within=timedelta(seconds=30))
    with pytest.raises(ValueError, match="failures"):
        login_events(failures=1)


# ================================================================== error_burst_after_deploy
def logs(*spec: tuple[float, str, str], service: str = "checkout") -> list[dict[str, Any]]:
    """A service's log lines from (minutes, kind, level) triples."""
    return [
        {"id": i, "service": service, "ts": int(m * MIN), "kind": k, "level": lvl}
        for i, (m, k, lvl) in enumerate(spec)
    ]


def deploy(m: float) -> tuple[float, str, str]:
    return (m, "deploy", "INFO")


def error(m: float, level: str = "ERROR") -> tuple[float, str, str]:
    return (m, "request", level)


def info(m: float) -> tuple[float, str, str]:
    return (m, "request", "INFO")


def alerts(events: list[dict[str, Any]], engine: str, **kw: Any) -> list[dict[str, list[int]]]:
    pattern = error_burst_after_deploy(**kw)
    return stages(cep.match(events, pattern, key="service", time="ts", engine=engine))


@pytest.mark.parametrize("engine", ENGINES)
class TestErrorBurstAfterDeploy:
    def test_reports_the_deploy_and_its_first_n_errors_once(self, engine: str) -> None:
        events = logs(
            deploy(0),
            info(0.5),
            error(1),
            error(2),
            info(2.5),
            error(3),
            error(4, "FATAL"),
            error(5),
            error(6),
            error(7),
        )
        assert alerts(events, engine) == [{"deploy": [0], "errors": [2, 3, 5, 6, 7]}]

    def test_one_error_too_few_is_no_alert(self, engine: str) -> None:
        events = logs(deploy(0), error(1), error(2), error(3), error(4), info(5))
        assert alerts(events, engine) == []

    def test_the_window_is_half_open(self, engine: str) -> None:
        late = logs(deploy(0), error(1), error(2), error(3), error(4), error(10))
        assert alerts(late, engine) == []
        in_time = logs(deploy(0), error(1), error(2), error(3), error(4), error(10))
        in_time[-1]["ts"] -= 1
        assert alerts(in_time, engine) == [{"deploy": [0], "errors": [1, 2, 3, 4, 5]}]

    def test_errors_without_a_deploy_before_them_are_no_alert(self, engine: str) -> None:
        events = logs(
            error(0), error(1), error(2), error(3), error(4), error(5), deploy(6), info(7)
        )
        assert alerts(events, engine) == []

    def test_warnings_are_not_errors(self, engine: str) -> None:
        events = logs(deploy(0), *[error(m, "WARN") for m in range(1, 8)])
        assert alerts(events, engine) == []
        assert alerts(events, engine, levels=("ERROR", "WARN")) == [
            {"deploy": [0], "errors": [1, 2, 3, 4, 5]}
        ]

    def test_a_deploy_and_errors_on_different_services_are_no_alert(self, engine: str) -> None:
        events = logs(deploy(0), service="search") + [
            {**e, "id": 10 + e["id"]} for e in logs(*[error(m) for m in range(1, 7)])
        ]
        assert alerts(events, engine) == []

    def test_a_hotfix_during_the_burst_is_not_a_second_alert(self, engine: str) -> None:
        events = logs(
            deploy(0),
            error(1),
            error(2),
            deploy(3),
            error(4),
            error(5),
            error(6),
            error(7),
            error(8),
            error(9),
        )
        assert alerts(events, engine) == [{"deploy": [0], "errors": [1, 2, 4, 5, 6]}]

    def test_each_bad_deploy_is_reported(self, engine: str) -> None:
        events = logs(
            deploy(0),
            *[error(m) for m in (1, 2, 3, 4, 5)],
            deploy(30),
            *[error(m) for m in (31, 32, 33, 34, 35)],
        )
        assert alerts(events, engine) == [
            {"deploy": [0], "errors": [1, 2, 3, 4, 5]},
            {"deploy": [6], "errors": [7, 8, 9, 10, 11]},
        ]

    def test_the_alert_comes_at_the_nth_error(self, engine: str) -> None:
        matcher = Matcher(error_burst_after_deploy(errors=3), engine=engine)
        lines = [deploy(0), error(1), info(2), error(3), error(4), error(5)]
        out = [len(matcher.process({"kind": k, "level": lvl}, int(m * MIN))) for m, k, lvl in lines]
        assert out == [0, 0, 0, 0, 1, 0]


# ================================================================== failed_logins_then_success
def attempts(*spec: tuple[float, str], user: str = "ana") -> list[dict[str, Any]]:
    """A user's login attempts from (seconds, outcome) pairs."""
    return [
        {"id": i, "user": user, "ts": int(s * SEC), "outcome": o} for i, (s, o) in enumerate(spec)
    ]


def fails(*seconds: float) -> list[tuple[float, str]]:
    return [(s, "failure") for s in seconds]


def ok(s: float) -> tuple[float, str]:
    return (s, "success")


def takeovers(events: list[dict[str, Any]], engine: str, **kw: Any) -> list[dict[str, list[int]]]:
    pattern = failed_logins_then_success(**kw)
    return stages(cep.match(events, pattern, key="user", time="ts", engine=engine))


@pytest.mark.parametrize("engine", ENGINES)
class TestFailedLoginsThenSuccess:
    def test_reports_every_failure_of_the_run_and_the_success(self, engine: str) -> None:
        events = attempts(*fails(0, 3, 6, 9, 12, 15, 18), ok(25), ok(3600))
        assert takeovers(events, engine) == [{"failures": [0, 1, 2, 3, 4, 5, 6], "success": [7]}]

    def test_one_failure_too_few_is_a_typo(self, engine: str) -> None:
        assert takeovers(attempts(*fails(0, 3, 6, 9), ok(12)), engine) == []

    def test_a_success_in_between_ends_the_run(self, engine: str) -> None:
        events = attempts(*fails(0, 3, 6), ok(9), *fails(40, 43, 46), ok(50))
        assert takeovers(events, engine) == []

    def test_failures_older_than_the_window_are_left_out(self, engine: str) -> None:
        events = attempts(*fails(*[k * 90 for k in range(9)]), ok(8 * 90 + 20))
        assert takeovers(events, engine) == [{"failures": [2, 3, 4, 5, 6, 7, 8], "success": [9]}]

    def test_a_success_too_long_after_the_first_failures_is_no_takeover(self, engine: str) -> None:
        assert takeovers(attempts(*fails(0, 60, 120, 180, 240), ok(600)), engine) == []
        assert takeovers(attempts(*fails(0, 60, 120, 180, 240), ok(599.999)), engine) == [
            {"failures": [0, 1, 2, 3, 4], "success": [5]}
        ]

    def test_failures_that_never_succeed_are_no_takeover(self, engine: str) -> None:
        assert takeovers(attempts(*fails(*range(0, 40, 2))), engine) == []

    def test_attempts_on_other_accounts_do_not_break_the_run(self, engine: str) -> None:
        ana = attempts(*fails(0, 4, 8, 12, 16), ok(20))
        ben = [
            {**e, "id": 100 + e["id"]} for e in attempts(*fails(2, 6, 10, 14), ok(18), user="ben")
        ]
        assert takeovers(ana + ben, engine) == [{"failures": [0, 1, 2, 3, 4], "success": [5]}]

    def test_the_alert_comes_at_the_success(self, engine: str) -> None:
        matcher = Matcher(failed_logins_then_success(failures=2), engine=engine)
        outcomes = ["failure", "failure", "failure", "success"]
        out = [len(matcher.process({"outcome": o}, i * SEC)) for i, o in enumerate(outcomes)]
        assert out == [0, 0, 0, 1]
