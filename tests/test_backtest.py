"""Backtesting two rule sets over the same history (#13 item 4): ``cep.runtime.backtest``.

The figures are checked on data whose answer is known: generated card transactions with
injected card-testing episodes and near misses (:mod:`cep.patterns.synthetic.fraud`), and
a small explicit history whose precision, recall and time to detect are worked out by
hand below.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep import CEPError, Pattern, col, match
from cep.patterns.fraud import card_testing
from cep.patterns.synthetic import Dataset
from cep.patterns.synthetic.fraud import card_transactions
from cep.rules import Rule, load_rules
from cep.runtime.backtest import (
    Backtest,
    BacktestError,
    LabelError,
    backtest,
    truthy,
)
from cep.runtime.cli import main

MINUTE = 60_000
DAY = 86_400_000
#: 2024-03-04T00:00:00Z
T0 = 1_709_510_400_000


# ------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def cards() -> Dataset:
    """Card transactions: 6 injected card-testing episodes and 5 near misses (seed 1)."""
    return card_transactions(seed=1)


def labelled(ds: Dataset) -> list[dict[str, Any]]:
    """The dataset's events with ``fraud``: true on every event of an injected episode."""
    taken = {i for e in ds.episodes for i in e.ids}
    return [{**e, "fraud": e["id"] in taken} for e in ds.events]


def spans(ds: Dataset, episode: Any) -> tuple[str, int, int]:
    """(key, first time, last time) of an injected episode or near miss."""
    times = [e["ts"] for e in ds.events if e["id"] in set(episode.ids)]
    return episode.key, min(times), max(times)


def found(bt: Backtest, rule: str, side: str) -> set[tuple[str, int, int]]:
    m = bt.matches[(bt.matches["rule"] == rule) & (bt.matches["side"] == side)]
    return {(k, _ms(s), _ms(e)) for k, s, e in zip(m["key"], m["start"], m["end"], strict=True)}


def _ms(stamp: pd.Timestamp) -> int:
    return int(stamp.value // 1_000_000)


def row(frame: pd.DataFrame, **where: Any) -> dict[str, Any]:
    """The one row of ``frame`` where the columns equal the values given."""
    picked = frame
    for column, value in where.items():
        picked = picked[picked[column] == value]
    assert len(picked) == 1, picked
    return picked.iloc[0].to_dict()


def ct(version: int = 1, name: str = "card_testing", **kw: Any) -> Rule:
    return Rule(name, version, "card_id", card_testing(**kw))


def over(amount: float, version: int = 1, name: str = "big") -> Rule:
    return Rule(name, version, "card", Pattern.begin("big").where(col("amount") > amount))


# ================================================================ what changed
def test_a_wider_window_finds_exactly_the_late_cashout_near_miss_more(cards: Dataset) -> None:
    """Card testing's window widened from 10 to 15 minutes: every injected episode is found
    by both versions, and the new one finds one more match: the near miss whose big
    charge comes 30 s after the 10-minute window, and no other."""
    bt = backtest(cards.events, [ct(1)], [ct(2, within=timedelta(minutes=15))], time="ts")
    episodes = {spans(cards, e) for e in cards.episodes}
    late_cashout = spans(cards, cards.near_misses[1])
    assert row(bt.summary, rule="card_testing") == {
        "rule": "card_testing", "status": "changed", "old_version": 1, "new_version": 2,
        "old": 6, "new": 7, "only_old": 0, "only_new": 1, "both": 6}
    assert found(bt, "card_testing", "both") == episodes
    assert found(bt, "card_testing", "new") == {late_cashout}
    assert found(bt, "card_testing", "old") == set()


def test_a_rule_that_needs_fewer_tests_adds_two_near_misses(cards: Dataset) -> None:
    """Two test charges instead of three: the near miss with one charge too few matches
    whole, and the late cash-out now matches from its later test charges (10 minutes
    before it); the episodes stay "both"."""
    bt = backtest(cards.events, [ct(1)], [ct(2, tests=2)], time="ts")
    too_few, late = (spans(cards, n) for n in cards.near_misses[:2])
    added = found(bt, "card_testing", "new")
    assert too_few in added and len(added) == 2
    [(key, start, end)] = added - {too_few}
    assert (key, end) == (late[0], late[2]) and end - start <= 10 * MINUTE < end - late[1]
    assert row(bt.summary, rule="card_testing")["both"] == 6


def test_a_removed_rule_has_only_old_matches_and_an_added_one_only_new(cards: Dataset) -> None:
    bt = backtest(cards.events, [ct(1)], [ct(1, name="renamed")], time="ts")
    assert bt.summary[["rule", "status", "old", "new", "only_old", "only_new", "both"]
                      ].to_dict("records") == [
        {"rule": "renamed", "status": "added", "old": 0, "new": 6, "only_old": 0,
         "only_new": 6, "both": 0},
        {"rule": "card_testing", "status": "removed", "old": 6, "new": 0, "only_old": 6,
         "only_new": 0, "both": 0}]
    assert found(bt, "card_testing", "old") == found(bt, "renamed", "new")


def test_identical_rules_run_once_and_every_match_is_both(cards: Dataset) -> None:
    """The same rule in both sets (a new version or description that changes nothing the
    matcher does) runs once in the one job; its matches are all "both"."""
    same = Rule("card_testing", 7, "card_id", card_testing(), description="reworded")
    bt = backtest(cards.events, [ct(1), ct(1, name="velocity", tests=2)],
                  [same, ct(2, name="velocity", tests=4)], time="ts")
    assert row(bt.summary, rule="card_testing") == {
        "rule": "card_testing", "status": "unchanged", "old_version": 1, "new_version": 7,
        "old": 6, "new": 6, "only_old": 0, "only_new": 0, "both": 6}
    assert set(bt.matches[bt.matches["rule"] == "card_testing"]["side"]) == {"both"}
    assert bt.job is not None and sorted(bt.job.rules) == [
        "both:card_testing", "new:velocity", "old:velocity"]  # one job, the same rule once


def test_disabled_rules_do_not_run(cards: Dataset) -> None:
    off = Rule("card_testing", 2, "card_id", card_testing(), enabled=False)
    gone = Rule("other", 1, "card_id", card_testing(), enabled=False)
    bt = backtest(cards.events, [ct(1), gone], [off, gone], time="ts")
    assert bt.summary[["rule", "status", "old", "new"]].to_dict("records") == [
        {"rule": "card_testing", "status": "removed", "old": 6, "new": 0},
        {"rule": "other", "status": "disabled", "old": 0, "new": 0}]
    assert bt.job is not None and sorted(bt.job.rules) == ["old:card_testing"]


def test_each_side_finds_what_the_rule_finds_alone(cards: Dataset) -> None:
    """One pass over both sets gives each side exactly the match ids cep.match gives for
    its rule alone."""
    old, new = ct(1), ct(2, within=timedelta(minutes=15))
    bt = backtest(cards.events, [old], [new], time="ts")
    for side, rule in (("old", old), ("new", new)):
        alone = match(cards.events, rule.pattern, key="card_id", time="ts", output="arrow")
        mine = bt.matches[bt.matches["side"].isin([side, "both"])]
        assert set(mine["match_id"]) == set(alone.column("match_id").to_pylist())


@settings(max_examples=12, deadline=None)
@given(old_limit=st.sampled_from([100, 300, 500, 800]),
       new_limit=st.sampled_from([100, 300, 500, 800]))
def test_only_old_only_new_and_both_partition_the_two_sides(old_limit: int,
                                                            new_limit: int) -> None:
    """For any two thresholds: old = only_old + both, new = only_new + both, and each
    side's matches are those cep.match finds for the rule alone."""
    events = [{"card": f"c{i % 7}", "ts": T0 + i * MINUTE, "amount": (i * 137) % 1000}
              for i in range(200)]
    bt = backtest(events, [over(old_limit)], [over(new_limit, 2)], time="ts",
                  engine="reference")
    s = row(bt.summary, rule="big")
    assert s["old"] == s["only_old"] + s["both"] and s["new"] == s["only_new"] + s["both"]
    for side, limit in (("old", old_limit), ("new", new_limit)):
        alone = [e for e in events if e["amount"] > limit]
        assert s[side] == len(alone)
    assert s["status"] == ("unchanged" if old_limit == new_limit else "changed")


# ======================================================== counts per day and key
def test_alerts_per_utc_day_of_the_end_and_per_key() -> None:
    events = [{"card": "a", "ts": T0 + 23 * 60 * MINUTE, "amount": 900},   # day 1, 23:00
              {"card": "a", "ts": T0 + DAY + MINUTE, "amount": 200},      # day 2, 00:01
              {"card": "b", "ts": T0 + DAY + 2 * MINUTE, "amount": 700}]
    bt = backtest(events, [over(500)], [over(100, 2)], time="ts")
    day = pd.Timestamp(T0, unit="ms").date()
    assert bt.by_day.to_dict("records") == [
        {"rule": "big", "day": day, "old": 1, "new": 1},
        {"rule": "big", "day": day + timedelta(days=1), "old": 1, "new": 2}]
    assert bt.by_key.to_dict("records") == [
        {"rule": "big", "key_field": "card", "key": "a", "old": 1, "new": 2},
        {"rule": "big", "key_field": "card", "key": "b", "old": 1, "new": 1}]


# ============================================================= labels, by hand
#: card, minutes after T0, amount, fraud (event label), flagged (key label)
HAND = [
    ("a", 0, 10, True, False), ("a", 2, 900, True, True),     # fraud from 0, alerted at 2
    ("b", 0, 200, False, False), ("b", 5, 20, True, True),    # alerted (new) before its fraud
    ("c", 0, 5, True, False), ("c", 10, 150, True, False),    # fraud from 0, new alerts at 10
    ("d", 0, 1000, False, False),                             # alerted, never fraud
    ("e", 0, 1, True, None),                                  # fraud nobody alerts
]


def hand_history() -> list[dict[str, Any]]:
    return [{"card": c, "ts": T0 + m * MINUTE, "amount": a, "fraud": f, "flagged": k}
            for c, m, a, f, k in HAND]


def test_precision_recall_and_time_to_detect_by_hand_with_event_labels() -> None:
    """Old: amount > 500 alerts a (at minute 2) and d; new: amount > 100 alerts a, b (at
    minute 0), c (at minute 10) and d.  Positive keys (a fraudulent event): a, b, c, e;
    onsets a 0, b 5, c 0, e 0.

    old: precision 1 of 2 alerted keys; detected a (2 min after its onset) of 4: recall
    0.25; alert precision: a's alert took a fraud event, d's did not: 0.5.
    new: precision 3 of 4 (a, b, c; b's alert came before its fraud began, still an alert
    on a fraudulent key); detected a (2 min) and c (10 min), not b (alerted before its
    onset): recall 0.5; time to detect median 6 min, p90 2 + 0.9 * 8 = 9.2 min, max 10
    min; alert precision 2 of 4 (a's and c's alerts took fraud events)."""
    bt = backtest(hand_history(), [over(500)], [over(100, 2)], time="ts", label="fraud")
    assert bt.scores is not None
    old, new = row(bt.scores, side="old"), row(bt.scores, side="new")
    assert {k: old[k] for k in ("alerts", "alerted_keys", "positive_keys",
                                "alerted_positive_keys", "detected_keys", "positive_alerts")
            } == {"alerts": 2, "alerted_keys": 2, "positive_keys": 4,
                  "alerted_positive_keys": 1, "detected_keys": 1, "positive_alerts": 1}
    assert (old["precision"], old["recall"], old["alert_precision"]) == (0.5, 0.25, 0.5)
    assert (old["ttd_median_s"], old["ttd_p90_s"], old["ttd_max_s"]) == (120, 120, 120)
    assert (new["alerts"], new["alerted_positive_keys"], new["detected_keys"]) == (4, 3, 2)
    assert (new["precision"], new["recall"], new["alert_precision"]) == (0.75, 0.5, 0.5)
    assert new["ttd_median_s"] == 360 and new["ttd_max_s"] == 600
    assert new["ttd_p90_s"] == pytest.approx(552)
    s = row(bt.summary, rule="big")
    assert (s["old_precision"], s["new_precision"], s["old_recall"], s["new_recall"]) == (
        0.5, 0.75, 0.25, 0.5)
    assert (s["only_old"], s["only_new"], s["both"]) == (0, 2, 2)
    assert dict(zip(bt.by_key["key"], bt.by_key["positive"], strict=True)) == {
        "a": True, "b": True, "c": True, "d": False}
    m = bt.matches
    assert dict(zip(m["key"], m["positive"], strict=True)) == {
        "a": True, "b": False, "c": True, "d": False}


def test_precision_recall_and_time_to_detect_by_hand_with_key_labels() -> None:
    """``flagged`` marks a and b (on one of their rows); a key's fraud then begins at its
    first event (minute 0), so every alert on it detects it.

    old: alerted a, d; precision 1/2; detected a (2 min) of 2: recall 0.5.
    new: alerted a, b, c, d; precision 2/4; detected a (2 min) and b (0 min): recall 1;
    time to detect median 1 min, max 2 min; no alert precision with key labels."""
    bt = backtest(hand_history(), [over(500)], [over(100, 2)], time="ts", label="flagged",
                  labels="key")
    assert bt.scores is not None
    old, new = row(bt.scores, side="old"), row(bt.scores, side="new")
    assert (old["positive_keys"], old["precision"], old["recall"], old["ttd_max_s"]) == (
        2, 0.5, 0.5, 120)
    assert (new["precision"], new["recall"], new["detected_keys"]) == (0.5, 1.0, 2)
    assert (new["ttd_median_s"], new["ttd_max_s"]) == (60, 120)
    assert np.isnan(new["alert_precision"]) and "positive" not in bt.matches


def test_empty_denominators_are_null_not_errors() -> None:
    """A rule that alerts nothing has no precision; history without fraud has no recall
    and no time to detect."""
    bt = backtest(hand_history(), [over(5000)], [over(100, 2)], time="ts", label="fraud")
    assert bt.scores is not None
    old = row(bt.scores, side="old")
    assert old["alerts"] == 0 and np.isnan(old["precision"]) and old["recall"] == 0
    assert np.isnan(old["alert_precision"]) and np.isnan(old["ttd_median_s"])
    calm = [{**e, "fraud": False} for e in hand_history()]
    bt = backtest(calm, [over(500)], [over(100, 2)], time="ts", label="fraud")
    assert bt.scores is not None
    new = row(bt.scores, side="new")
    assert new["precision"] == 0 and np.isnan(new["recall"]) and np.isnan(new["ttd_max_s"])


def test_generated_episodes_score_perfectly_and_the_near_miss_costs_precision(
        cards: Dataset) -> None:
    """Every injected episode is fraud: the 10-minute rule alerts exactly them (5 cards,
    one hit twice), precision and recall 1, and it detects each card when its cash-out
    comes (the time from its first test charge).  The 15-minute rule alerts one innocent
    card more (the near miss): precision 5/6 over keys, 6/7 over alerts."""
    events = labelled(cards)
    bt = backtest(events, [ct(1)], [ct(2, within=timedelta(minutes=15))], time="ts",
                  label="fraud")
    assert bt.scores is not None
    first_episode = {}
    for e in cards.episodes:
        key, start, end = spans(cards, e)
        if key not in first_episode or start < first_episode[key][0]:
            first_episode[key] = (start, end)
    ttd = sorted((end - start) / 1000 for start, end in first_episode.values())
    old, new = row(bt.scores, side="old"), row(bt.scores, side="new")
    assert (old["precision"], old["recall"], old["alert_precision"]) == (1, 1, 1)
    assert (new["precision"], new["recall"]) == (5 / 6, 1)
    assert new["alert_precision"] == 6 / 7
    for side in (old, new):
        assert side["positive_keys"] == 5 and side["detected_keys"] == 5
        assert side["ttd_median_s"] == pytest.approx(float(np.median(ttd)))
        assert side["ttd_max_s"] == pytest.approx(max(ttd))


@pytest.mark.parametrize("values, expected", [
    ([True, False, None], [True, False, False]),
    ([1, 0, None, 7], [True, False, False, True]),
    ([1.0, 0.0, float("nan")], [True, False, False]),
    (["true", "FALSE", "yes", "no", "1", "0", "", None], [True, False, True, False, True,
                                                          False, False, False]),
])
def test_label_values(values: list[Any], expected: list[bool]) -> None:
    assert truthy(pa.array(values, from_pandas=True)).tolist() == expected


def test_labels_that_say_neither_yes_nor_no_are_an_error() -> None:
    history = [{**e, "fraud": "maybe" if e["card"] == "d" else e["fraud"]}
               for e in hand_history()]
    with pytest.raises(LabelError, match=r"label column 'fraud' holds 'maybe'"):
        backtest(history, [over(500)], [over(100, 2)], time="ts", label="fraud")


def test_a_missing_label_column_names_the_column_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    pd.DataFrame(hand_history()).to_csv(path, index=False)
    with pytest.raises(LabelError, match=r"history\.csv: no label column 'is_fraud' \(its "
                                         r"columns: card, ts, amount, fraud, flagged\)"):
        backtest([path], [over(500)], [over(100, 2)], time="ts", label="is_fraud")
    with pytest.raises(LabelError, match="no label column 'is_fraud'"):
        backtest(hand_history(), [over(500)], [over(100, 2)], time="ts", label="is_fraud")
    assert issubclass(LabelError, BacktestError) and issubclass(BacktestError, CEPError)


# ================================================= the history in any form and order
def _write(tmp_path: Path, form: str, events: list[dict[str, Any]]) -> Any:
    frame = pd.DataFrame(events)
    if form == "list":
        return events
    if form == "pandas":
        return frame
    if form == "arrow":
        return pa.Table.from_pandas(frame, preserve_index=False)
    path = tmp_path / f"history.{form}"
    if form == "parquet":
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    elif form == "csv":
        frame.to_csv(path, index=False)
    else:
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


@pytest.mark.parametrize("form", ["list", "pandas", "arrow", "parquet", "csv", "jsonl"])
def test_every_form_of_history_in_any_order_gives_the_same_figures(
        form: str, tmp_path: Path) -> None:
    """Memory or files, shuffled: the history is replayed in event-time order."""
    events = hand_history()[::-1]  # newest first
    bt = backtest(_write(tmp_path, form, events), [over(500)], [over(100, 2)], time="ts",
                  label="fraud")
    assert bt.scores is not None
    assert bt.scores[["side", "precision", "recall", "alert_precision", "ttd_max_s"]
                     ].to_dict("records") == [
        {"side": "old", "precision": 0.5, "recall": 0.25, "alert_precision": 0.5,
         "ttd_max_s": 120.0},
        {"side": "new", "precision": 0.75, "recall": 0.5, "alert_precision": 0.5,
         "ttd_max_s": 600.0}]


def test_both_engines_give_the_same_figures(cards: Dataset) -> None:
    events = labelled(cards)
    old, new = [ct(1), ct(1, name="few", tests=2)], [ct(2, within=timedelta(minutes=15))]
    numba = backtest(events, old, new, time="ts", label="fraud", engine="numba")
    reference = backtest(events, old, new, time="ts", label="fraud", engine="reference")
    for name, frame in numba.frames().items():
        pd.testing.assert_frame_equal(frame, reference.frames()[name], obj=name)
    assert len(numba.matches) == 6 + 1 + 8  # both, only new, the removed rule's


# ============================================================== rules with problems
def _rule_files(folder: Path, *rules: Rule) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rule in rules:
        (folder / f"{rule.name}.json").write_text(rule.to_json())
    return folder


def test_broken_rules_are_reported_and_the_others_backtested(tmp_path: Path,
                                                             cards: Dataset) -> None:
    old = _rule_files(tmp_path / "old", ct(1), ct(1, name="velocity", tests=4))
    new = _rule_files(tmp_path / "new", ct(2, within=timedelta(minutes=15)))
    (new / "velocity.json").write_text('{"name": "velocity", "version": 2,')
    mixed = Pattern.begin("a").where((col("amount") > 1) & (col("amount") == "x"))
    (new / "typed.json").write_text(Rule("typed", 1, "card_id", mixed).to_json())
    (new / "by_ip.json").write_text(Rule("by_ip", 1, "ip", card_testing()).to_json())
    bt = backtest(cards.events, old, new, time="ts")
    assert [str(p) for p in bt.problems] == [
        f"{new}/velocity.json: line 1, column 35: not valid JSON: Expecting property name "
        "enclosed in double quotes",
        f"{new}/typed.json: $.pattern: stage 'a': (col('amount') == 'x'): cannot compare "
        "numeric with string",
        f"{new}/by_ip.json: rule 'by_ip': refused every event of the history in the new set "
        "(1,554): missing key field 'ip'"]
    assert row(bt.summary, rule="card_testing")["only_new"] == 1  # the rest ran
    assert set(load_rules(old).rules) == {"card_testing", "velocity"}
    # velocity is not removed: its new file is broken (a problem above); ran in the old set
    assert row(bt.summary, rule="velocity")["status"] == "broken"
    assert row(bt.summary, rule="velocity")["only_new"] == 0


@pytest.mark.parametrize("engine", ["reference", "numba"])
def test_a_rule_whose_types_do_not_fit_the_history_is_a_problem_on_either_engine(
        tmp_path: Path, cards: Dataset, engine: str) -> None:
    """Found by a check: the numba engine, compiling the rule for the history's column
    types, stopped the whole backtest (and replay) on a rule ``cep rules check`` passed."""
    old = _rule_files(tmp_path / "old", ct(1))
    text_as_number = Pattern.begin("a").where(col("merchant") > 5)  # merchant is text
    new = _rule_files(tmp_path / "new", ct(1), Rule("merchant_num", 1, "card_id",
                                                    text_as_number))
    bt = backtest(pa.Table.from_pylist(cards.events), old, new, time="ts", engine=engine)
    [problem] = [str(p) for p in bt.problems]
    assert problem.startswith(f"{new}/merchant_num.json: rule 'merchant_num': refused every "
                              f"event of the history in the new set ({len(cards.events):,}): ")
    assert "merchant" in problem.split("new set")[1] and "new:" not in problem
    assert row(bt.summary, rule="card_testing")["both"] == 6  # the other rule ran


def _scored(bt: Backtest) -> tuple[float, float]:
    first = bt.scores.iloc[0]
    return first["precision"], first["recall"]


def test_a_key_column_of_numbers_and_text_scores_each_key_once(tmp_path: Path) -> None:
    """Found by a check: the alerts' keys of a column of mixed types came as JSON text
    ('"x"'), the labels' as plain text ('x'): the alerted fraudulent key x counted as
    neither positive nor detected."""
    rows = [{"acct": 7, "ts": 1000, "amount": 900, "fraud": True},
            {"acct": "x", "ts": 2000, "amount": 10, "fraud": True},
            {"acct": "x", "ts": 3000, "amount": 900, "fraud": False},
            {"acct": 8, "ts": 4000, "amount": 900, "fraud": False}]
    history = tmp_path / "h.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = [Rule("big", 1, "acct", Pattern.begin("a").where(col("amount") > 500))]
    bt = backtest(history, rules, rules, time="ts", label="fraud")
    assert sorted(bt.matches["key"]) == ["7", "8", "x"]
    assert _scored(bt) == (pytest.approx(2 / 3), 1.0)  # 7 and x alerted and fraud, 8 not


def test_composite_keys_with_commas_in_their_values_stay_apart() -> None:
    rows = [{"x": "a,b", "y": "c", "ts": 1000, "amount": 10.0, "fraud": True},  # never alerted
            {"x": "a", "y": "b,c", "ts": 2000, "amount": 900.0, "fraud": False}]  # alerted
    rules = [Rule("big", 1, ("x", "y"), Pattern.begin("s").where(col("amount") > 500))]
    bt = backtest(rows, rules, rules, time="ts", label="fraud")
    assert list(bt.by_key["key"]) == ["a,b\\,c"]
    assert _scored(bt) == (0.0, 0.0)  # were 1.0 and 1.0: ('a,b', 'c') and ('a', 'b,c') met


def test_a_composite_key_given_as_a_list_is_a_tuple() -> None:
    rule = Rule("big", 1, ["x", "y"], Pattern.begin("s").where(col("amount") > 500))  # type: ignore[arg-type]
    assert rule.key == ("x", "y") and rule == Rule.from_dict(rule.to_dict())
    bt = backtest([{"x": "a", "y": "b", "ts": 1000, "amount": 900.0}], [rule], [rule], time="ts")
    assert row(bt.summary, rule="big")["both"] == 1  # was a TypeError: unhashable list


def test_a_rule_is_broken_only_where_its_own_file_or_document_is(tmp_path: Path) -> None:
    """Found by a check: any problem in a file of the same base name anywhere in the other
    set (or in the same list file, about another rule) made a removed rule 'broken'."""
    doc = over(500, name="x").to_dict()
    (tmp_path / "old" / "a").mkdir(parents=True)
    (tmp_path / "new" / "b").mkdir(parents=True)
    (tmp_path / "old" / "m").mkdir()
    (tmp_path / "new" / "m").mkdir()
    (tmp_path / "old" / "a" / "rules.json").write_text(json.dumps(doc))  # x: deleted in new
    (tmp_path / "new" / "b" / "rules.json").write_text("{ broken")  # another folder's file
    (tmp_path / "old" / "m" / "set.json").write_text(json.dumps(
        {"rules": [{**doc, "name": "r1"}, {**doc, "name": "r2"}]}))
    (tmp_path / "new" / "m" / "set.json").write_text(json.dumps(
        {"rules": [{**doc, "name": "r1", "version": "2"}]}))  # r1 broken, r2 deleted
    history = [{"card": "c1", "ts": 1000, "amount": 900.0}]
    bt = backtest(history, tmp_path / "old", tmp_path / "new", time="ts")
    assert {n: row(bt.summary, rule=n)["status"] for n in ("x", "r1", "r2")} == {
        "x": "removed", "r1": "broken", "r2": "removed"}


def test_a_change_without_a_new_version_is_backtested_and_said_a_job_would_refuse_it(
        tmp_path: Path) -> None:
    """Found by a check: backtest showed 'changed', version 1 -> 1, exit 0, while a running
    job refuses that change: a team could backtest, deploy, and nothing would change."""
    old = _rule_files(tmp_path / "old", over(500))
    new = _rule_files(tmp_path / "new", over(100))  # version 1 again
    history = [{"card": "c1", "ts": 1000, "amount": 900}, {"card": "c2", "ts": 2000, "amount": 200}]
    bt = backtest(history, old, new, time="ts")
    assert row(bt.summary, rule="big")["status"] == "changed"
    assert row(bt.summary, rule="big")["only_new"] == 1  # backtested as it is
    assert [str(p) for p in bt.problems] == [
        f"{new}/big.json: rule 'big': changed but kept version 1: a running job would not "
        "apply it (give the change a new version)"]


def test_events_that_cannot_be_used_are_warned_of() -> None:
    """An event without a usable time is no rule's; one a rule cannot read (text where it
    compares a number) is that rule's dead letter, while a rule that reads no amount takes
    it.  Both are counted and said; the rest is backtested."""
    history = [*hand_history(), {"card": "a", "ts": "yesterday", "amount": 1000},
               {"card": "a", "ts": T0, "amount": "lots"}]
    every = Rule("every", 1, "card", Pattern.begin("a"))
    bt = backtest(history, [over(500), every], [over(100, 2), every], time="ts")
    assert [w.split(" (e.g. ")[0] for w in bt.warnings] == [
        "1 of 10 events of the history could not be used",
        "rule 'big' in the old set refused 1 event",
        "rule 'big' in the new set refused 1 event"]
    assert "time field 'ts' is 'yesterday'" in bt.warnings[0]
    assert row(bt.summary, rule="big")["new"] == 4 and not bt.problems
    assert row(bt.summary, rule="every")["both"] == 9


def test_rules_are_data_not_code(tmp_path: Path) -> None:
    """A rule file is never run: a document that is not a rule is a problem, nothing else."""
    folder = tmp_path / "new"
    folder.mkdir()
    (folder / "evil.json").write_text(json.dumps(
        {"name": "evil", "version": 1, "key": "card",
         "pattern": {"stages": "__import__('os').system('touch pwned')"}}))
    bt = backtest(hand_history(), [over(500)], folder, time="ts")
    assert [p.file for p in bt.problems] == [str(folder / "evil.json")]
    assert not Path("pwned").exists() and not (tmp_path / "pwned").exists()


def test_wrong_arguments_are_clear_errors() -> None:
    with pytest.raises(BacktestError, match="labels is one of event, key"):
        backtest(hand_history(), [], [], time="ts", label="fraud", labels="row")
    with pytest.raises(BacktestError, match="the old rules are a directory"):
        backtest(hand_history(), 42, [], time="ts")  # type: ignore[arg-type]
    with pytest.raises(CEPError, match="no/such/rules: no such file or directory"):
        backtest(hand_history(), "no/such/rules", [], time="ts")


# ======================================================================= files
def test_write_gives_parquet_and_csv_of_every_table(tmp_path: Path) -> None:
    bt = backtest(hand_history(), [over(500)], [over(100, 2)], time="ts", label="fraud")
    written = bt.write(tmp_path / "report")
    names = sorted(p.name for p in written)
    assert names == sorted(f"{t}.{f}" for t in ("summary", "matches", "by_day", "by_key",
                                                "scores") for f in ("parquet", "csv"))
    summary = pq.read_table(tmp_path / "report" / "summary.parquet").to_pandas()
    assert summary.loc[0, "new_precision"] == 0.75
    matches = pq.read_table(tmp_path / "report" / "matches.parquet")
    assert matches.schema.field("end").type == pa.timestamp("ms", tz="UTC")
    csv = pd.read_csv(tmp_path / "report" / "by_key.csv")
    assert csv[["key", "old", "new"]].to_dict("records") == [
        {"key": "a", "old": 1, "new": 1}, {"key": "b", "old": 0, "new": 1},
        {"key": "c", "old": 0, "new": 1}, {"key": "d", "old": 1, "new": 1}]


# ================================================================= the command
def _cli_setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    old = _rule_files(tmp_path / "rules", over(500))
    new = _rule_files(tmp_path / "edited", over(100, 2), over(800, name="huge"))
    history = tmp_path / "history.csv"
    pd.DataFrame(hand_history()).to_csv(history, index=False)
    return old, new, history


def test_cep_backtest_prints_the_tables_and_writes_the_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new, history = _cli_setup(tmp_path)
    out = tmp_path / "report"
    assert main(["backtest", str(old), str(new), str(history), "--time", "ts", "--label",
                 "fraud", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    lines = [" ".join(line.replace("│", " ").split()) for line in printed.splitlines()]
    assert "big changed 1 -> 2 2 4 0 2 2" in lines
    assert "huge added - -> 1 0 2 0 2 0" in lines
    assert "big new 4 0.750 0.500 0.500 2 of 4 6m 9m 12s 10m" in lines
    assert f"written: 10 files in {out}/" in lines
    assert pd.read_csv(out / "summary.csv")["rule"].tolist() == ["big", "huge"]


def test_cep_backtest_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new, history = _cli_setup(tmp_path)
    (new / "broken.json").write_text("{")
    assert main(["backtest", str(old), str(new), str(history), "--time", "ts",
                 "--output", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert f"{new}/broken.json: line 1, column 2: not valid JSON" in captured.err
    assert "big" in captured.out  # the other rules were backtested
    assert (tmp_path / "out" / "problems.txt").read_text().startswith(f"{new}/broken.json")
    assert main(["backtest", str(old), str(tmp_path / "nowhere"), str(history),
                 "--time", "ts"]) == 2
    assert "nowhere: no such file or directory" in capsys.readouterr().err
    assert main(["backtest", str(old), str(old), str(tmp_path / "none.csv"),
                 "--time", "ts"]) == 2
    assert main(["backtest", str(old), str(old), str(history), "--time", "ts",
                 "--label", "is_fraud"]) == 2
    err = capsys.readouterr().err
    assert f"{history}: no label column 'is_fraud'" in err


def test_labels_of_mixed_words_and_types_score_as_the_definitions_say(tmp_path: Path) -> None:
    """A CSV label column of true/false with a yes and a no among them (read as booleans
    with the odd rows as text), and a history whose labels mix types (True, "no", 2.5):
    the matched events carry such values as JSON text, which was refused ('"no"')."""
    big = [Rule("big", 1, "card", Pattern.begin("b").where(col("amount") > 500))]
    path = tmp_path / "labels.csv"
    path.write_text("card,ts,amount,fraud\nc1,1000,900,true\nc2,2000,900,false\n"
                    "c3,3000,900,false\nc4,4000,900,no\nc5,5000,900,yes\n")
    mixed = [{"card": f"c{i}", "ts": 1000 * i, "amount": 900, "fraud": label}
             for i, label in enumerate([True, "no", None, 2.5, 0.0, "yes"], start=1)]
    for history, positive, alerted in ((path, 2, 5), (mixed, 3, 6)):
        bt = backtest(history, big, big, time="ts", label="fraud")
        scores = bt.scores.set_index("side")
        assert scores.loc["new", "precision"] == positive / alerted
        assert scores.loc["new", "recall"] == 1.0


def test_a_rule_keyed_by_a_timestamp_finds_its_positive_keys(tmp_path: Path) -> None:
    """The alerts' keys and the labelled keys are one text whatever unit or time zone the
    timestamp was read in (a key of a card and a UTC day scored no key positive)."""
    from datetime import UTC, datetime

    days = pa.array([datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)],
                    pa.timestamp("ms", tz="UTC"))
    history = pa.table({"card": ["c1", "c2"], "day": days, "ts": [1000, 2000],
                        "amount": [900, 900], "fraud": [True, False]})
    rule = [Rule("big", 1, ("card", "day"), Pattern.begin("b").where(col("amount") > 500))]
    [found] = match(history, rule[0].pattern, key=("card", "day"), time="ts")[:1]
    assert found.key == ("c1", datetime(2024, 1, 1, tzinfo=UTC))  # its time zone kept
    bt = backtest(history, rule, rule, time="ts", label="fraud")
    scores = bt.scores.set_index("side")
    assert (scores.loc["new", "precision"], scores.loc["new", "recall"]) == (0.5, 1.0)
