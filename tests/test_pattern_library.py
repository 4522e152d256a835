"""What every library pattern promises, checked on the data its generator injects.

For each pattern of ``cep.patterns.library.LIBRARY``, on several seeds and on both
engines: it finds exactly the injected episodes, no match contains a near miss,
the data is sound ground truth, and the pattern runs on numba, survives JSON
and gives the same matches from lists, Arrow tables and pandas frames.  The
domain files (test_patterns_fraud/anomaly/ops.py) hold the hand-written scenarios.
"""

from __future__ import annotations

from functools import cache

import pytest

import cep
from cep import Pattern
from cep.nfa.engine import choose_engine
from cep.patterns.library import LIBRARY
from cep.patterns.synthetic import Dataset, Episode, found

ENGINES = ("reference", "numba")
SEEDS = (0, 1, 7)


@cache
def dataset(name: str, seed: int) -> Dataset:
    return LIBRARY[name].generate(seed=seed)


def run(ds: Dataset, events: object, pattern: Pattern, engine: str) -> frozenset[Episode]:
    """The episodes ``pattern`` finds in ``events`` (``ds``'s events in some form)."""
    return frozenset(found(cep.match(events, pattern, key=ds.key, time=ds.time, engine=engine)))


@cache
def matches(name: str, seed: int, engine: str) -> frozenset[Episode]:
    ds = dataset(name, seed)
    return run(ds, ds.events, LIBRARY[name].pattern(), engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", LIBRARY)
def test_finds_exactly_the_injected_episodes(name: str, seed: int, engine: str) -> None:
    assert matches(name, seed, engine) == set(dataset(name, seed).episodes)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", LIBRARY)
def test_no_match_holds_a_near_miss(name: str, seed: int, engine: str) -> None:
    for near in dataset(name, seed).near_misses:
        hits = [m for m in matches(name, seed, engine)
                if m.key == near.key and set(near.ids) <= set(m.ids)]
        assert not hits, f"near miss {near} is inside {hits}"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", LIBRARY)
def test_generated_data_is_sound_ground_truth(name: str, seed: int) -> None:
    ds = dataset(name, seed)
    ids = [e["id"] for e in ds.events]
    assert len(ids) == len(set(ids)), "ids are unique"
    assert 500 <= len(ds.events) <= 5_000
    assert len({e[ds.key] for e in ds.events}) >= 10, "many keys"
    assert len(ds.episodes) >= 3 and len(ds.near_misses) >= 3
    assert len(set(ds.episodes) | set(ds.near_misses)) == len(ds.episodes) + len(ds.near_misses)
    assert all(isinstance(e[ds.time], int) for e in ds.events), "integer epoch milliseconds"
    assert [e[ds.time] for e in ds.events] == sorted(e[ds.time] for e in ds.events)
    assert len({tuple(sorted(e)) for e in ds.events}) == 1, "every event has the same fields"
    by_id = {e["id"]: e for e in ds.events}
    for ep in ds.episodes:
        assert {by_id[i][ds.key] for i in ep.ids} == {ep.key}, ep
    for near in ds.near_misses:  # may span two keys (heat in one room, smoke next door)
        assert by_id[near.ids[0]][ds.key] == near.key, near


@pytest.mark.parametrize("name", LIBRARY)
def test_same_seed_same_data(name: str) -> None:
    generate = LIBRARY[name].generate
    a, b, c = generate(seed=3), generate(seed=3), generate(seed=4)
    assert (a.events, a.episodes, a.near_misses) == (b.events, b.episodes, b.near_misses)
    assert a.events != c.events


@pytest.mark.parametrize("name", LIBRARY)
def test_runs_on_the_numba_engine(name: str) -> None:
    assert choose_engine(LIBRARY[name].pattern(), "auto")[0] == "numba"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", LIBRARY)
def test_survives_json_with_the_same_results(name: str, engine: str) -> None:
    pattern = LIBRARY[name].pattern()
    loaded = Pattern.from_json(pattern.to_json())
    assert loaded == pattern and loaded.to_json() == pattern.to_json()
    ds = dataset(name, SEEDS[0])
    assert run(ds, ds.events, loaded, engine) == matches(name, SEEDS[0], engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", LIBRARY)
def test_same_results_from_arrow_and_pandas(name: str, engine: str) -> None:
    ds = dataset(name, SEEDS[0])
    pattern = LIBRARY[name].pattern()
    assert run(ds, ds.to_arrow(), pattern, engine) == matches(name, SEEDS[0], engine)
    assert run(ds, ds.to_pandas(), pattern, engine) == matches(name, SEEDS[0], engine)


