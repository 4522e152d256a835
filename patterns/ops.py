"""Operations and security patterns over service logs and login attempts.

Every pattern is built from expression conditions only, so it runs on the numba
engine and survives ``Pattern.to_json()`` / ``Pattern.from_json()``.  Run each
one keyed by the entity it watches (``cep.match(events, p, key=..., time="ts")``,
``ts`` in epoch milliseconds).

* :func:`error_burst_after_deploy` - key ``service``: a deploy, then N errors within T.
* :func:`failed_logins_then_success` - key ``user``: N or more failed logins in a
  row, then a successful one, within T (a brute force that worked).

Both report each incident once (skip past last event).  Data generators with
injected ground truth for each pattern are in :mod:`cep.patterns.synthetic.ops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from cep import Pattern, SkipStrategy, col


def error_burst_after_deploy(
    errors: int = 5,
    within: timedelta | int = timedelta(minutes=10),
    levels: Sequence[str] = ("ERROR", "FATAL"),
) -> Pattern:
    """A deploy followed by ``errors`` or more error log lines within ``within``, on one service.

    The classic bad release: right after a deploy the service starts failing.
    Run it keyed by service.  Fields: ``kind`` (``"deploy"`` marks a deploy;
    anything else is an ordinary log line) and ``level`` (a line counts as an
    error when its level is one of ``levels``).  Other lines in between are
    skipped.

    The match is ``{"deploy": [the deploy], "errors": [the first `errors`
    errors after it]}``, reported at the ``errors``-th error, less than
    ``within`` after the deploy (the window is half open).  Errors after that
    do not raise another alert for the same deploy (skip past last event), and
    a second deploy made while the burst was building (a hotfix that did not
    help) is not reported separately.

    >>> from cep import match
    >>> rows = [{"service": "checkout", "ts": t * 1000, "kind": k, "level": lvl} for t, k, lvl in
    ...         [(0, "deploy", "INFO"), (30, "request", "ERROR"), (45, "request", "INFO"),
    ...          (50, "request", "ERROR"), (70, "request", "FATAL")]]
    >>> [(m["deploy"][0]["ts"], len(m["errors"]))
    ...  for m in match(rows, error_burst_after_deploy(errors=3), key="service", time="ts")]
    [(0, 3)]
    """
    if isinstance(levels, str):
        levels = (levels,)
    return (
        Pattern.begin("deploy", skip=SkipStrategy.skip_past_last_event())
        .where(col("kind") == "deploy")
        .followed_by("errors")
        .where(col("level").isin(list(levels)))
        .times(errors)
        .within(within)
    )


def failed_logins_then_success(
    failures: int = 5,
    within: timedelta | int = timedelta(minutes=10),
) -> Pattern:
    """``failures`` or more failed logins in a row, then a successful one, within ``within``.

    Password guessing that worked: the account is probably compromised.  Run it
    keyed by user, on login attempts only (in a row means consecutive attempts
    for that user; a success in between ends the run).  Fields: ``outcome``
    (``"failure"`` or ``"success"``).

    The match is ``{"failures": [...], "success": [the success]}``, reported at
    the success.  ``failures`` holds the failures of the run that are less than
    ``within`` before the success (the window is half open), at least
    ``failures`` of them; older failures of a long run are left out.  Each run
    is reported once (skip past last event).

    >>> from cep import match
    >>> rows = [{"user": "ana", "ts": t * 1000, "outcome": o} for t, o in
    ...         [(0, "failure"), (4, "failure"), (9, "failure"), (15, "success")]]
    >>> [len(m["failures"]) for m in match(rows, failed_logins_then_success(failures=3),
    ...                                    key="user", time="ts")]
    [3]
    """
    return (
        Pattern.begin("failures", skip=SkipStrategy.skip_past_last_event())
        .where(col("outcome") == "failure")
        .times_or_more(failures)
        .consecutive()
        .greedy()
        .next("success")
        .where(col("outcome") == "success")
        .within(within)
    )
