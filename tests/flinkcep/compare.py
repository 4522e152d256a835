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
from cep import Pattern, SkipStrategy, WithinType, col

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
        """Is this Flink's known loss with a PREVIOUS_AND_CURRENT window (it sets no timer
        for the window: a timeout, or a match ending in not_followed_by, fires only if
        another event of the key comes)?  Then cep has outputs Flink lacks, nothing else."""
        return (self.case["pattern"].get("withinType") == "PREVIOUS_AND_CURRENT"
                and self.what in ("matches", "timeouts") and not self.only_flink)

    def __str__(self) -> str:
        events = [(e["key"], e["id"], e["ts"], e["v"]) for e in self.case["events"]]
        return (f"case {self.case['id']} ({self.engine}, {self.what}): "
                f"{describe(self.case['pattern'])}\n  events (key, id, ts, v): {events}\n"
                f"  only Flink: {self.only_flink}\n  only cep:   {self.only_cep}")


def _condition(either: list[list[Any]]) -> Any:
    ops = {"eq": lambda c: col("v") == c, "ne": lambda c: col("v") != c,
           "lt": lambda c: col("v") < c, "gt": lambda c: col("v") > c}
    out = None
    for op, constant in either:
        term = ops[op](constant)
        out = term if out is None else out | term
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
    p: Any = None
    for stage in described["stages"]:
        name, how = stage["name"], stage["contiguity"]
        p = (Pattern.begin(name, skip=_skip(described["skip"])) if how == "begin"
             else {"next": p.next, "followedBy": p.followed_by,
                   "followedByAny": p.followed_by_any, "notNext": p.not_next,
                   "notFollowedBy": p.not_followed_by}[how](name))
        p = p.where(_condition(stage["cond"]))
        p = _quantified(p, stage.get("quant"))
        for flag, modify in (("optional", "optional"), ("greedy", "greedy"),
                             ("consecutive", "consecutive"),
                             ("allowCombinations", "allow_combinations")):
            if stage.get(flag):
                p = getattr(p, modify)()
        if "until" in stage:
            p = p.until(_condition(stage["until"]))
    if described.get("within") is not None:
        p = p.within(described["within"],
                     WithinType(described.get("withinType", "FIRST_AND_LAST")))
    return p


def _quantified(p: Any, quant: dict[str, Any] | None) -> Any:
    if not quant:
        return p
    kind = quant["kind"]
    if kind == "times":
        return p.times(quant["n"])
    if kind == "timesRange":
        return p.times(quant["n"], quant["m"])
    return p.one_or_more() if kind == "oneOrMore" else p.times_or_more(quant["n"])


def describe(described: dict[str, Any]) -> str:
    """A case's pattern in one line."""
    parts = []
    for stage in described["stages"]:
        text = f'{stage["contiguity"]}({stage["name"]}) where {stage["cond"]}'
        for k in ("quant", "optional", "greedy", "consecutive", "allowCombinations", "until"):
            if stage.get(k):
                text += f" {k}={stage[k]}"
        parts.append(text)
    return (" . ".join(parts) + f' skip={described["skip"]} within={described.get("within")}'
            f' {described.get("withinType", "")}').rstrip()


def _taken(match: Any) -> str:
    return json.dumps({stage: [e["id"] for e in events]
                       for stage, events in sorted(match.items())})


def on_cep(case: dict[str, Any], engine: str) -> tuple[Counter, Counter] | None:
    """(matches, timeouts) cep finds for a case; None when it refuses the pattern."""
    try:
        p = pattern(case["pattern"])
        matches, timeouts = cep.match([dict(e) for e in case["events"]], p, key="key",
                                      time="ts", engine=engine, timeouts=True)
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
