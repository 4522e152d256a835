"""The cases of :mod:`tests.flinkcep.cases` on cep, compared with what Flink wrote for them.

An output is its key and, per stage, the ids of the events it took (a timeout also its
time); outputs are compared as multisets, a refusal (a pattern the builder or Flink's
compiler rejects) as whether there was one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cep
from cep import Pattern, SkipStrategy, WithinType, col, count, lit, prev

ENGINES = ("reference", "numba")


@dataclass
class Difference:
    """What one engine found otherwise than Flink for one case."""

    case: dict[str, Any]
    engine: str
    what: str  # "matches", "timeouts" or "refusal"
    only_flink: list[Any]
    only_cep: list[Any]

    @property
    def flinks_lost_timer(self) -> bool:
        """Is this Flink's known loss of a timer?  Flink 2.3 registers an event-time timer
        only for the FIRST_AND_LAST window (``CepOperator.processEvent``: start +
        ``NFA.getWindowTime()``), none for a PREVIOUS_AND_CURRENT window nor for a loop
        window (``times(n, Duration)`` ...), so such a timeout, or a match ending in
        not_followed_by, fires only if another event of the key comes (or another timer
        does).  Then cep has outputs Flink lacks, nothing else; and a timeout so lost is
        one due after the last event of its key (one before it Flink would have seen)."""
        described = self.case["pattern"]
        between = described.get("withinType") == "PREVIOUS_AND_CURRENT"
        if self.only_flink or not (between or _loop_window(described["stages"])):
            return False
        if self.what == "matches":
            return between
        if self.what != "timeouts":
            return False
        last: dict[str, int] = {}
        for e in self.case["events"]:
            last[e["key"]] = max(last.get(e["key"], e["ts"]), e["ts"])
        return all(ts > last[key] for key, _, ts in self.only_cep)

    def __str__(self) -> str:
        events = [(e["key"], e["id"], e["ts"], e["v"]) for e in self.case["events"]]
        return (f"case {self.case['id']} ({self.engine}, {self.what}): "
                f"{describe(self.case['pattern'])}\n  events (key, id, ts, v): {events}\n"
                f"  only Flink: {self.only_flink}\n  only cep:   {self.only_cep}")


_OPS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "gt": lambda a, b: a > b, "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b}
_READS = {"first": cep.first, "last": cep.last, "min": cep.min, "max": cep.max,
          "sum": cep.sum}


def _operand(operand: Any) -> Any:
    """An operand of a term (see :mod:`tests.flinkcep.cases`) as an expression."""
    if not isinstance(operand, dict):
        return operand
    fn = operand["fn"]
    if fn == "v":
        out = col("v")
    elif fn == "prev":
        out = prev("v")
    elif fn == "count":
        out = count(operand["stage"])
    else:
        out = _READS[fn](operand["stage"], "v")
    return out + operand["add"] if operand.get("add") else out


def _term(term: Any) -> Any:
    if isinstance(term, dict):
        out = None
        for t in term["all"]:
            out = _term(t) if out is None else out & _term(t)
        return out
    lhs = lit(_operand(term[2])) if len(term) > 2 else col("v")
    return _OPS[term[0]](lhs, _operand(term[1]))


def _loop_window(stages: list[dict[str, Any]]) -> bool:
    return any("window" in s.get("quant", {}) or _loop_window(s.get("group", []))
               for s in stages)


def _condition(either: list[Any]) -> Any:
    out = None
    for term in either:
        out = _term(term) if out is None else out | _term(term)
    return out


def _skip(skip: dict[str, Any]) -> Any:
    kind = skip["type"]
    if kind == "skipToFirst":
        return SkipStrategy.skip_to_first(skip["stage"])
    if kind == "skipToLast":
        return SkipStrategy.skip_to_last(skip["stage"])
    return {"noSkip": SkipStrategy.no_skip, "skipToNext": SkipStrategy.skip_to_next,
            "skipPastLastEvent": SkipStrategy.skip_past_last_event}[kind]()


def pattern(described: dict[str, Any]) -> Pattern:
    """The cep pattern of a case's description (see :mod:`tests.flinkcep.cases`)."""
    p = _sequence(described["stages"], _skip(described["skip"]))
    if described.get("within") is not None:
        p = p.within(described["within"],
                     WithinType(described.get("withinType", "FIRST_AND_LAST")))
    return p


def _sequence(stages: list[dict[str, Any]], skip: Any) -> Any:
    """The stages one after another; a group's inner ones with ``skip`` None (cep's
    default there, as Flink's)."""
    p: Any = None
    for stage in stages:
        how = stage["contiguity"]
        step = _sequence(stage["group"], None) if "group" in stage else stage["name"]
        if how == "begin":
            p = Pattern.begin(step) if skip is None else Pattern.begin(step, skip=skip)
        else:
            p = {"next": p.next, "followedBy": p.followed_by,
                 "followedByAny": p.followed_by_any, "notNext": p.not_next,
                 "notFollowedBy": p.not_followed_by}[how](step)
        if "group" not in stage:
            p = p.where(_condition(stage["cond"]))
        p = _quantified(p, stage.get("quant"))
        for flag, modify in (("optional", "optional"), ("greedy", "greedy"),
                             ("consecutive", "consecutive"),
                             ("allowCombinations", "allow_combinations")):
            if stage.get(flag):
                p = getattr(p, modify)()
        if "until" in stage:
            p = p.until(_condition(stage["until"]))
    return p


def _quantified(p: Any, quant: dict[str, Any] | None) -> Any:
    if not quant:
        return p
    kind, window = quant["kind"], quant.get("window")
    if kind == "times":
        return p.times(quant["n"], window=window)
    if kind == "timesRange":
        return p.times(quant["n"], quant["m"], window=window)
    return (p.one_or_more(window=window) if kind == "oneOrMore"
            else p.times_or_more(quant["n"], window=window))


def describe(described: dict[str, Any]) -> str:
    """A case's pattern in one line."""
    return (_stages(described["stages"]) + f' skip={described["skip"]} '
            f'within={described.get("within")} {described.get("withinType", "")}').rstrip()


def _stages(stages: list[dict[str, Any]]) -> str:
    parts = []
    for stage in stages:
        text = (f'{stage["contiguity"]}(<{_stages(stage["group"])}>)' if "group" in stage
                else f'{stage["contiguity"]}({stage["name"]}) where {stage["cond"]}')
        for k in ("quant", "optional", "greedy", "consecutive", "allowCombinations", "until"):
            if stage.get(k):
                text += f" {k}={stage[k]}"
        parts.append(text)
    return " . ".join(parts)


def _taken(match: Any) -> str:
    return json.dumps({stage: [e["id"] for e in events]
                       for stage, events in sorted(match.items())})


def on_cep(case: dict[str, Any], engine: str) -> tuple[Counter, Counter] | None:
    """(matches, timeouts) cep finds for a case; None when it refuses the pattern."""
    try:
        p = pattern(case["pattern"])
        # cep caps a key's partial matches (10,000 by default), where FlinkCEP has no cap
        # (a documented difference: docs/porting.md, "State"); a looping group with
        # allow_combinations passes it on these streams, so compare with a far higher one
        matches, timeouts = cep.match([dict(e) for e in case["events"]], p, key="key",
                                      time="ts", engine=engine, timeouts=True,
                                      max_partial_matches=1_000_000)
    except cep.CEPError:
        return None
    return (Counter((m.key, _taken(m)) for m in matches),
            Counter((t.key, _taken(t), t.timestamp) for t in timeouts))


def on_flink(path: Path) -> dict[int, Any]:
    """What Harness.java wrote: per case, (matches, timeouts); None when Flink's compiler
    refused the pattern; the error's text when its job failed at run time (a Flink bug:
    such a pattern is not compared)."""
    out: dict[int, Any] = {}
    refused: dict[int, Any] = {}
    for line in path.read_text().splitlines():
        case, kind, key, body, ts = line.split("\t")
        c = int(case)
        if kind == "E":
            refused[c] = body if body.startswith("RUN ") else None
            continue
        matches, timeouts = out.setdefault(c, (Counter(), Counter()))
        taken = json.dumps(dict(sorted(json.loads(body).items())))
        if kind == "M":
            matches[(key, taken)] += 1
        else:
            timeouts[(key, taken, int(ts))] += 1
    out.update(refused)
    return out


def differences(cases: Iterable[dict[str, Any]], flink: dict[int, Any]) -> list[Difference]:
    """Every way each engine's output differs from Flink's."""
    found = []
    for case in cases:
        want = flink.get(case["id"], (Counter(), Counter()))
        if isinstance(want, str):
            continue  # Flink failed at run time
        for engine in ENGINES:
            got = on_cep(case, engine)
            if want is None or got is None:
                if (want is None) != (got is None):
                    found.append(Difference(case, engine, "refusal",
                                            [] if want is not None else ["refused"],
                                            [] if got is not None else ["refused"]))
                continue
            for what, theirs, ours in (("matches", want[0], got[0]),
                                       ("timeouts", want[1], got[1])):
                if theirs != ours:
                    found.append(Difference(case, engine, what,
                                            sorted((theirs - ours).elements()),
                                            sorted((ours - theirs).elements())))
    return found
