"""Random cases for the FlinkCEP comparison: a pattern described as data (what both
``Harness.java`` and :func:`tests.flinkcep.compare.pattern` build from) and its events.

A description: ``{"stages": [{"name", "contiguity", "cond", "quant"?, "optional"?,
"greedy"?, "consecutive"?, "allow_combinations"?, "until"?}], "skip": {"type", "stage"?},
"within"?, "within_type"?}``; a condition is a list of ``[op, constant]`` OR-ed together,
``op`` one of eq, ne, lt, gt over the event's ``v``.
"""

from __future__ import annotations

import random
from typing import Any

#: how often each contiguity follows a stage
CONTIGUITIES = {"next": 3, "followedBy": 3, "followedByAny": 3, "notNext": 1.2,
                "notFollowedBy": 1.2}
SKIPS = ("noSkip", "skipToNext", "skipPastLastEvent", "skipToFirst", "skipToLast")
KEYS = ("k0", "k1", "k2")


def cases(seed: int, count: int, ties: bool = False) -> list[dict[str, Any]]:
    """``count`` cases drawn from ``seed``; ``ties``: many events share a time."""
    rng = random.Random(seed)
    return [{"id": c, "pattern": _pattern(rng), "events": _events(rng, ties)}
            for c in range(count)]


def _condition(rng: random.Random) -> list[list[Any]]:
    either = [[rng.choice(["eq", "eq", "lt", "gt", "ne"]), rng.randint(0, 4)]]
    if rng.random() < 0.15:
        either.append([rng.choice(["eq", "lt", "gt"]), rng.randint(0, 4)])
    return either


def _quantifier(rng: random.Random) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.4:
        return None
    if r < 0.55:
        return {"kind": "times", "n": rng.randint(1, 3)}
    if r < 0.67:
        low = rng.randint(1, 2)
        return {"kind": "timesRange", "n": low, "m": low + rng.randint(1, 2)}
    if r < 0.85:
        return {"kind": "oneOrMore"}
    return {"kind": "timesOrMore", "n": rng.randint(1, 3)}


def _stage(rng: random.Random, name: str, contiguity: str) -> dict[str, Any]:
    stage: dict[str, Any] = {"name": name, "contiguity": contiguity, "cond": _condition(rng)}
    if contiguity in ("notNext", "notFollowedBy"):
        return stage
    quant = _quantifier(rng)
    if quant:
        stage["quant"] = quant
    if rng.random() < 0.25:
        stage["optional"] = True
    looping = quant is not None and (quant["kind"] != "times" or quant["n"] > 1)
    if looping:
        if rng.random() < 0.2:
            stage["greedy"] = True
        r = rng.random()
        if r < 0.25:
            stage["consecutive"] = True
        elif r < 0.45:
            stage["allowCombinations"] = True
    if quant and quant["kind"] in ("oneOrMore", "timesOrMore") and rng.random() < 0.2:
        stage["until"] = _condition(rng)
    return stage


def _pattern(rng: random.Random) -> dict[str, Any]:
    stages = [_stage(rng, "a", "begin")]
    for name in "bcd"[:rng.randint(1, 3)]:
        contiguity = rng.choices(list(CONTIGUITIES), list(CONTIGUITIES.values()))[0]
        stages.append(_stage(rng, name, contiguity))
    described: dict[str, Any] = {"stages": stages}
    skip = rng.choice(SKIPS)
    taking = [s["name"] for s in stages if s["contiguity"] not in ("notNext", "notFollowedBy")]
    described["skip"] = ({"type": skip, "stage": rng.choice(taking)}
                         if skip in ("skipToFirst", "skipToLast") else {"type": skip})
    if rng.random() < 0.4 or stages[-1]["contiguity"] == "notFollowedBy":
        described["within"] = rng.randint(5, 60)
        if rng.random() < 0.3:
            described["withinType"] = "PREVIOUS_AND_CURRENT"
    return described


def _events(rng: random.Random, ties: bool) -> list[dict[str, Any]]:
    events, event_id = [], 1
    for key in KEYS:
        t = 1000
        for _ in range(rng.randint(3, 12)):
            t += rng.choice([0, 0, 1, 5, 10]) if ties else rng.randint(1, 12)
            events.append({"key": key, "id": event_id, "ts": t, "v": rng.randint(0, 4)})
            event_id += 1
    return events
