"""Pictures for explaining alerts: one key's events over time with its matches highlighted.

Needs the ``viz`` extra (``pip install 'cep[viz]'``, i.e. matplotlib); figures are drawn
with matplotlib's Agg canvas, never through pyplot, so no GUI backend is touched
(:mod:`cep.nfa.figures` makes and saves them, for the NFA's pictures too).

>>> from cep.runtime.plot import plot_key
>>> from cep.patterns.fraud import card_testing
>>> rows = [{"card_id": "C031", "ts": i * 30_000, "amount": a}
...         for i, a in enumerate([42.0, 1.0, 0.5, 2.0, 899.0, 12.0])]
>>> fig = plot_key(rows, card_testing(), key="card_id", time="ts",
...                value="amount", key_value="C031", path="C031.png")
>>> fig.axes[0].get_title(loc="left")
'card_id = C031: 6 events, 1 match'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from os import PathLike
from typing import TYPE_CHECKING, Any

from cep.errors import InputError
from cep.keys import key_spec
from cep.matches import Match
from cep.nfa.engine import EngineName as Engine
from cep.nfa.figures import new_figure, require_matplotlib, save_figure
from cep.pattern import Pattern
from cep.runtime.bounded import _field, _key_of, _rows, _timestamp, match

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# ------------------------------------------------------------------ timelines

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SPAN_COLOR = "#f4a261"
_EVENT_COLOR = "#8c8c8c"


@dataclass
class KeyEvents:
    """One key's events in time order (``times`` in epoch milliseconds) and its matches.

    >>> rows = [{"card": 1, "ts": 1, "amount": 2}, {"card": 1, "ts": 2, "amount": 900}]
    >>> p = Pattern.begin("small").where(lambda e: e["amount"] < 5).next("big")
    >>> ke = key_events(rows, p, key="card", time="ts", key_value=1)
    >>> ke.times, len(ke.matches), ke.stage_names
    ([1, 2], 1, ['small', 'big'])
    """

    key_value: Any
    events: list[Any]
    times: list[int]
    matches: list[Match]
    key_name: str = "key"
    stage_names: list[str] = field(default_factory=list)
    between: tuple[int, int] | None = None  # the time range asked for, epoch milliseconds
    time_unit: str | None = None  # of integer times in the events (None: milliseconds)


def key_events(
    events: Any,
    pattern: Pattern | Iterable[Match],
    *,
    key: str | Sequence[str] | Callable[[Any], Any],
    time: str | Callable[[Any], Any],
    key_value: Any,
    between: tuple[Any, Any] | None = None,
    engine: Engine = "auto",
    time_unit: str | None = None,
) -> KeyEvents:
    """The events of the key ``key_value`` and their matches.

    ``events`` is anything :func:`cep.match` reads (list of dicts, pandas, Arrow, a file).
    ``pattern`` is a Pattern (run with :func:`cep.match` over this key's events) or matches
    found before (those of other keys are left out).  A string ``key_value`` also finds a
    key whose text is that string (``"17"`` finds the integer key 17, as typed on a command
    line); with a composite ``key`` (a list of fields) ``key_value`` is a tuple, or text
    with the values separated by commas (``"C031,M7"``).  ``between=(start, end)``
    (anything a time field may hold; None for open) keeps the events in that range and
    the matches that overlap it.  ``time_unit`` is as in :func:`cep.match`.  A key with no
    events is an :class:`cep.InputError` naming it.

    >>> rows = [{"card": 1, "ts": 1, "amount": 2}, {"card": 1, "ts": 2, "amount": 900}]
    >>> p = Pattern.begin("small").where(lambda e: e["amount"] < 5).next("big")
    >>> len(key_events(rows, p, key="card", time="ts", key_value="1").matches)
    1
    >>> rows = [dict(r, shop="s1") for r in rows]
    >>> key_events(rows, p, key=["card", "shop"], time="ts", key_value="1,s1").key_value
    (1, 's1')
    """
    rows, source = _rows(events)
    key = key_spec(key)
    keys = [_key_of(row, key, i, source) for i, row in enumerate(rows)]
    picked = [i for i, k in enumerate(keys) if _same(k, key_value)]
    if not picked and isinstance(key_value, str):
        wanted = key_value.split(",") if isinstance(key, tuple) else None
        picked = [i for i, k in enumerate(keys) if (
            [str(part) for part in k] == wanted if wanted is not None else str(k) == key_value)]
    key_name = key if isinstance(key, str) else ",".join(key) if isinstance(key, tuple) else "key"
    if not picked:
        seen = list(dict.fromkeys(str(k) for k in keys))
        examples = ", ".join(seen[:5]) + (", ..." if len(seen) > 5 else "")
        where = f" in {source}" if source else ""
        raise InputError(
            f"key {key_value!r}: no events with {key_name} = {key_value!r}{where} "
            f"({len(rows)} events" + (f"; keys: {examples})" if seen else ")")
        )
    actual = keys[picked[0]]
    mine = [rows[i] for i in picked]
    times = [_timestamp(_field(rows[i], time, "time", i, source), time, i, source, time_unit)
             for i in picked]
    if isinstance(pattern, Pattern):
        found = match(mine, pattern, key=key, time=time, engine=engine, time_unit=time_unit)
        stages = pattern.stage_names()
    else:
        found = [m for m in pattern if m.key is None or _same(m.key, actual)]
        stages = list(dict.fromkeys(name for m in found for name in m))
    order = sorted(range(len(mine)), key=lambda i: times[i])
    mine, times = [mine[i] for i in order], [times[i] for i in order]
    window: tuple[int, int] | None = None
    if between is not None and between != (None, None):
        start, end = (None if v is None else _timestamp(v, "between", -1, None) for v in between)
        lo = start if start is not None else min(times)
        hi = end if end is not None else max(times)
        if hi < lo:
            raise InputError(f"between: the end {between[1]!r} is before the start {between[0]!r}")
        keep = [i for i, t in enumerate(times) if lo <= t <= hi]
        mine, times = [mine[i] for i in keep], [times[i] for i in keep]
        found = [m for m in found if m.end >= lo and m.start <= hi]
        window = (lo, hi)
    found = sorted(found, key=lambda m: (m.start, m.end))
    return KeyEvents(actual, mine, times, found, key_name, stages, window, time_unit)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def timeline(
    ke: KeyEvents,
    *,
    time: str | Callable[[Any], Any],
    value: str | Callable[[Any], Any] | None = None,
    title: str | None = None,
) -> Figure:
    """Draw :func:`key_events`' result: the key's events over UTC time, each match a shaded
    span from its first to its last event, the matched events marked and coloured by stage.

    With a numeric ``value`` field the events are a line of that value over time; with a
    non-numeric one (e.g. an event type) each distinct value gets a row of markers; with
    none, the events are one row of markers.

    >>> rows = [{"card": 1, "ts": 1000, "amount": 2}, {"card": 1, "ts": 2000, "amount": 900}]
    >>> p = Pattern.begin("small").where(lambda e: e["amount"] < 5).next("big")
    >>> fig = timeline(key_events(rows, p, key="card", time="ts", key_value=1),
    ...                time="ts", value="amount")
    >>> save_figure(fig, "card-1.svg").exists()
    True
    """
    import matplotlib.dates as mdates
    from matplotlib.transforms import blended_transform_factory

    value_name = value if isinstance(value, str) else ("value" if value is not None else None)
    raw = [None if value is None else _field(e, value, "value", i, None)
           for i, e in enumerate(ke.events)]
    numeric = value is not None and all(v is None or _number(v) is not None for v in raw) and any(
        _number(v) is not None for v in raw)
    rows = 1 if numeric or value is None else len({str(v) for v in raw})
    fig = new_figure(11, min(30.0, max(4.4, 0.27 * rows + 1.6)), layout="constrained")
    ax = fig.add_subplot()
    categories: dict[str, int] = {}

    def y_of(v: Any) -> float:
        if value is None:
            return 0.0
        if numeric:
            number = _number(v)
            return math.nan if number is None else number
        return float(categories.setdefault(str(v), len(categories)))

    xs = [_datetime(t) for t in ke.times]
    ys = [y_of(v) for v in raw]
    if numeric:
        ax.plot(xs, ys, color=_EVENT_COLOR, linewidth=1.0, marker="o", markersize=3,
                zorder=2, label=f"{value_name} ({len(xs)} events)", gid="events")
        ax.set_ylabel(str(value_name))
    else:
        ax.scatter(xs, ys, s=22, color=_EVENT_COLOR, marker="o", zorder=2,
                   label=f"events ({len(xs)})", gid="events")
        names = list(categories) if value is not None else [str(ke.key_value)]
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(-0.6, len(names) - 0.4)
        if value_name:
            ax.set_ylabel(str(value_name))

    first, last = (ke.times[0], ke.times[-1]) if ke.times else (0, 0)
    for m in ke.matches:
        first, last = min(first, m.start), max(last, m.end)
    if ke.between is not None:
        first, last = ke.between
    least = max(1_000, (last - first) // 150)  # a one-event match still shows as a band
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for i, m in enumerate(ke.matches):
        lo, hi = m.start, m.end
        if hi - lo < least:
            lo, hi = (lo + hi) // 2 - least // 2, (lo + hi) // 2 + least // 2
        ax.axvspan(_datetime(lo), _datetime(hi), color=_SPAN_COLOR, alpha=0.25, zorder=1,
                   linewidth=0, gid=f"match-{i}", label="match" if i == 0 else None)
        ax.text(_datetime((lo + hi) // 2), 1.01, f"#{i + 1}", transform=trans, ha="center",
                va="bottom", fontsize=8, color="#a0522d", parse_math=False)

    stages = list(ke.stage_names)
    for m in ke.matches:
        stages += [s for s in m if s not in stages]
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#e377c2",
               "#8c564b", "#bcbd22", "#7f7f7f"]
    markers = ["o", "s", "D", "^", "v", "P", "X", "*", "h", "<"]
    for j, stage in enumerate(stages):
        px: list[datetime] = []
        py: list[float] = []
        for m in ke.matches:
            for e in m.get(stage, []):
                px.append(_datetime(_timestamp(_field(e, time, "time", -1, None), time, -1, None,
                                               ke.time_unit)))
                py.append(y_of(None if value is None else _field(e, value, "value", -1, None)))
        if px:
            ax.scatter(px, py, s=70, color=palette[j % len(palette)],
                       marker=markers[j % len(markers)], edgecolor="black", linewidth=0.6,
                       zorder=4, label=f"{stage} ({len(px)})", gid=f"stage-{stage}")

    if ke.between is not None:
        ax.set_xlim(_datetime(ke.between[0]), _datetime(ke.between[1]))
    locator = mdates.AutoDateLocator(tz=UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    ax.set_xlabel("time (UTC)")
    ax.grid(True, axis="both", color="#e6e6e6", linewidth=0.8, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    n = len(ke.matches)
    heading = title or (f"{ke.key_name} = {ke.key_value}: {len(ke.events)} events, "
                        f"{n} match{'es' if n != 1 else ''}")
    ax.set_title(heading, loc="left", fontsize=11, pad=14, parse_math=False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    return fig


def plot_key(
    events: Any,
    pattern: Pattern | Iterable[Match],
    *,
    key: str | Callable[[Any], Any],
    time: str | Callable[[Any], Any],
    key_value: Any,
    value: str | Callable[[Any], Any] | None = None,
    between: tuple[Any, Any] | None = None,
    path: str | PathLike[str] | None = None,
    title: str | None = None,
    engine: Engine = "auto",
) -> Figure:
    """A timeline of one key's events with each match highlighted, to explain an alert.

    ``events`` and ``pattern`` (a Pattern, or matches found before) as in :func:`key_events`;
    ``value`` as in :func:`timeline`.  With ``path`` (.png, .svg or .pdf) the figure is also
    written there.  Returns the matplotlib Figure.

    >>> from pathlib import Path
    >>> from cep.patterns.fraud import card_testing
    >>> rows = [{"card_id": "C031", "ts": i * 30_000, "amount": a}
    ...         for i, a in enumerate([42.0, 1.0, 0.5, 2.0, 899.0, 12.0])]
    >>> fig = plot_key(rows, card_testing(), key="card_id", time="ts", value="amount",
    ...                key_value="C031", path="C031.png")
    >>> Path("C031.png").exists()
    True
    """
    require_matplotlib()
    ke = key_events(events, pattern, key=key, time=time, key_value=key_value, between=between,
                    engine=engine)
    fig = timeline(ke, time=time, value=value, title=title)
    if path is not None:
        save_figure(fig, path)
    return fig
