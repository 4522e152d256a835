"""Pictures: the NFA as SVG / PNG (Graphviz or matplotlib), one key's matches on a timeline,
and the ``cep explain --format`` / ``cep plot`` commands (#6)."""

from __future__ import annotations

import re
import struct
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from cep import InputError, Pattern, VisualizationError, col  # noqa: E402
from cep.nfa.compiler import compile_pattern  # noqa: E402
from cep.nfa.render import graphviz_available, layout, render  # noqa: E402
from cep.patterns.fraud import card_testing  # noqa: E402
from cep.runtime.cli import main  # noqa: E402
from cep.runtime.plot import key_events, plot_key, save_figure  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def negation() -> Pattern:
    """A NOT stage (a STOP state), an optional stage, loops waiting between events."""
    return (
        Pattern.begin("login").where(col("type") == "login")
        .not_followed_by("logout").where(col("type") == "logout")
        .followed_by("pw").where(col("type") == "pwchange").optional()
        .followed_by("wire").where(col("amount") > 1000)
        .within(timedelta(hours=1))
    )


def optional_and_pending() -> Pattern:
    """until(), followed_by_any, optional, and a trailing NOT (a PENDING state)."""
    return (
        Pattern.begin("a").where(col("x") > 1).one_or_more().until(col("x") < 0)
        .followed_by_any("b").where(col("x") == 2).optional()
        .followed_by("c").not_followed_by("d").within(5000)
    )


def bounded_loop() -> Pattern:
    """not_next, and times(2, 4) with a gap window on each state of the loop."""
    return (
        Pattern.begin("a").where(col("x") > 1).not_next("n").where(col("x") < 0)
        .followed_by("c").times(2, 4, window=1000)
    )


SAMPLES = [card_testing, negation, optional_and_pending, bounded_loop]


def svg_texts(svg: str) -> list[str]:
    """The text of every <text> element, in document order (the SVG must parse)."""
    root = ET.fromstring(svg)
    return ["".join(el.itertext()) for el in root.iter("{http://www.w3.org/2000/svg}text")]


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# ------------------------------------------------------------------ the NFA as a picture


@pytest.mark.parametrize("make", SAMPLES, ids=lambda f: f.__name__)
def test_matplotlib_svg_names_every_state_condition_and_edge_kind(make) -> None:
    pattern = make()
    nfa = compile_pattern(pattern)
    svg = pattern.to_svg(renderer="matplotlib")
    texts = svg_texts(svg)
    joined = squeeze("".join(texts))
    for stage in pattern.stage_names():
        assert stage in texts
    for state in nfa.states.values():
        assert state.name in texts
        for t in state.transitions:
            if t.condition is not None:
                assert squeeze(repr(t.condition)) in joined, (state.name, repr(t.condition))
    kinds = {t.action.value for s in nfa.states.values() for t in s.transitions}
    assert kinds <= set(texts)  # the legend names each kind of edge drawn
    assert any(text.startswith("NFA: ") and "skip" in text for text in texts)


def test_svg_legend_names_take_ignore_and_proceed_and_state_kinds() -> None:
    texts = svg_texts(negation().to_svg(renderer="matplotlib"))
    assert {"TAKE", "IGNORE", "PROCEED"} <= set(texts)
    assert {"Start state", "Normal state", "Final state", "Stop state"} <= set(texts)
    assert "Pending state" in svg_texts(optional_and_pending().to_svg(renderer="matplotlib"))


def test_gap_windows_are_written_under_their_states() -> None:
    texts = svg_texts(bounded_loop().to_svg(renderer="matplotlib"))
    assert texts.count("gap 1 s") == 3  # c:1, c:3 and c:4 time out 1 s after the last event


def test_matplotlib_png_has_the_signature_and_a_sensible_size() -> None:
    width, height = png_size(card_testing().to_png(renderer="matplotlib"))
    assert 600 <= width <= 4000 and 150 <= height <= 2000
    assert width > 2 * height  # a chain is drawn left to right
    small = png_size(Pattern.begin("a").to_png(renderer="matplotlib", dpi=60))
    assert small[0] < width and small[0] >= 100


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_the_same_pattern_gives_the_same_bytes(fmt: str) -> None:
    nfa = compile_pattern(negation())
    first = render(nfa, fmt, "matplotlib")
    render(compile_pattern(card_testing()), fmt, "matplotlib")  # no state carried over
    assert render(compile_pattern(negation()), fmt, "matplotlib") == first


@pytest.mark.parametrize("make", SAMPLES, ids=lambda f: f.__name__)
def test_layout_runs_left_to_right_without_overlaps(make) -> None:
    nfa = compile_pattern(make())
    lay = layout(nfa)
    nodes = list(lay.nodes.values())
    assert {n.state.name for n in nodes} == set(nfa.states)
    start = lay.nodes[nfa.start.name]
    assert start.x == min(n.x for n in nodes) and start.row == 0
    for i, a in enumerate(nodes):  # states never touch each other
        for b in nodes[i + 1:]:
            assert ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5 > a.radius + b.radius + 0.3
    for e in lay.edges:  # every forward edge points right, every loop is a loop
        src, dst = lay.nodes[e.transition.source.name], lay.nodes[e.transition.target.name]
        assert bool(e.loop_side) == (src is dst)
    xmin, ymin, xmax, ymax = lay.bounds
    assert all(xmin <= n.x - n.radius and n.x + n.radius <= xmax for n in nodes)
    assert all(ymin <= n.y - n.radius and n.y + n.radius <= ymax for n in nodes)


def test_the_main_line_of_card_testing_is_one_row_ending_in_the_final_state() -> None:
    lay = layout(compile_pattern(card_testing()))
    chain = ["small:2", "small:1", "small:0", "small", "big", "$endState$"]
    assert [lay.nodes[name].row for name in chain] == [0] * 6
    xs = [lay.nodes[name].x for name in chain]
    assert xs == sorted(xs) and len(set(xs)) == 6
    loops = [e for e in lay.edges if e.loop_side]
    assert [(e.transition.source.name, e.transition.action.value) for e in loops] == [
        ("small", "TAKE")
    ]


def test_stop_states_go_below_the_main_line_and_waiting_states_above() -> None:
    lay = layout(compile_pattern(negation()))
    assert lay.nodes["logout"].row < 0  # STOP: the NOT stage
    assert lay.nodes["pw:0"].row > 0 and lay.nodes["wire:0"].row > 0
    assert [lay.nodes[n].row for n in ("login", "pw", "wire", "$endState$")] == [0, 0, 0, 0]


def test_labels_cover_no_state() -> None:
    for make in SAMPLES:
        lay = layout(compile_pattern(make()))
        for e in lay.edges:
            if not e.label or e.loop_side:
                continue
            width = max(len(line) for line in e.label) * 0.6 * 7 / 72
            x, y = e.label_at
            for n in lay.nodes.values():
                inside_x = abs(x - n.x) < width / 2 + n.radius - 0.05
                inside_y = abs(y - n.y) < len(e.label) * 0.06 + n.radius - 0.05
                assert not (inside_x and inside_y), (make.__name__, e.label, n.state.name)


def test_unknown_format_and_renderer_are_refused() -> None:
    nfa = compile_pattern(card_testing())
    with pytest.raises(VisualizationError, match="unknown image format 'jpg'"):
        render(nfa, "jpg")
    with pytest.raises(VisualizationError, match="unknown renderer 'tikz'"):
        render(nfa, "svg", "tikz")


def test_graphviz_renderer_without_dot_says_what_to_do(monkeypatch) -> None:
    monkeypatch.setattr("cep.nfa.render.shutil.which", lambda name: None)
    assert not graphviz_available()
    with pytest.raises(VisualizationError, match="dot program on PATH"):
        card_testing().to_svg(renderer="graphviz")
    # auto falls back to matplotlib
    assert card_testing().to_svg() == card_testing().to_svg(renderer="matplotlib")


def test_missing_matplotlib_asks_for_the_viz_extra(monkeypatch) -> None:
    monkeypatch.setattr("cep.nfa.render.shutil.which", lambda name: None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(VisualizationError, match=r"pip install 'cep\[viz\]'"):
        card_testing().to_png()
    cep = __import__("cep")
    assert cep.VisualizationError is VisualizationError and issubclass(VisualizationError,
                                                                       cep.CEPError)


@pytest.mark.skipif(not graphviz_available(), reason="Graphviz's dot is not on PATH")
def test_graphviz_draws_the_dot_text() -> None:
    pattern = negation()
    svg = pattern.to_svg(renderer="graphviz")
    texts = svg_texts(svg)
    for state in compile_pattern(pattern).states:
        assert state in texts
    assert "TAKE" in texts and "IGNORE" in texts and "PROCEED" in texts
    assert pattern.to_svg(renderer="graphviz") == svg
    assert pattern.to_svg() == svg  # auto prefers Graphviz
    width, height = png_size(pattern.to_png(renderer="graphviz"))
    assert width > 200 and height > 100


# ------------------------------------------------------------------ cep explain


def test_explain_text_is_the_default(capsys) -> None:
    assert main(["explain", "cep.patterns.fraud:card_testing"]) == 0
    assert capsys.readouterr().out == card_testing().explain() + "\n"


def test_explain_dot_and_svg_go_to_stdout(capsys) -> None:
    assert main(["explain", "cep.patterns.fraud:card_testing", "--format", "dot"]) == 0
    assert capsys.readouterr().out == card_testing().to_dot() + "\n"
    args = ["explain", "cep.patterns.fraud:card_testing", "-f", "svg", "--renderer", "matplotlib"]
    assert main(args) == 0
    assert capsys.readouterr().out == card_testing().to_svg(renderer="matplotlib")


def test_explain_png_needs_an_output_file(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "cep.patterns.fraud:card_testing", "--format", "png"])
    assert exit_.value.code == 2
    assert "--format png writes binary data: give -o FILE" in capsys.readouterr().err


def test_explain_refuses_an_unknown_format(capsys, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "cep.patterns.fraud:card_testing", "--format", "jpg"])
    assert exit_.value.code == 2
    assert "invalid choice: 'jpg'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "cep.patterns.fraud:card_testing", "-o", str(tmp_path / "nfa.jpg")])
    assert exit_.value.code == 2
    assert "cannot tell the format from" in capsys.readouterr().err
    assert not (tmp_path / "nfa.jpg").exists()


def test_explain_writes_the_format_the_file_suffix_names(tmp_path: Path) -> None:
    png, svg = tmp_path / "nfa.png", tmp_path / "nfa.svg"
    assert main(["explain", "cep.patterns.fraud:card_testing", "-o", str(png),
                 "--renderer", "matplotlib"]) == 0
    assert png.read_bytes() == card_testing().to_png(renderer="matplotlib")
    assert main(["explain", "cep.patterns.fraud:card_testing", "-o", str(svg), "-f", "svg",
                 "--renderer", "matplotlib"]) == 0
    assert "small:2" in svg_texts(svg.read_text())


def test_explain_reports_an_unwritable_file(capsys, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "nfa.svg"
    assert main(["explain", "cep.patterns.fraud:card_testing", "-o", str(target),
                 "--renderer", "matplotlib"]) == 2
    assert f"cep explain: cannot write {target}" in capsys.readouterr().err


# ------------------------------------------------------------------ timelines

T0 = 1_709_600_000_000  # 2024-03-05 00:53:20 UTC


def card_events() -> list[dict]:
    """Card A: two card-testing episodes an hour apart; card B: one; card C: none."""
    rows = []
    for card, start, amounts in [
        ("A", 0, [1.0, 2.0, 900.0]),
        ("B", 30_000, [3.0, 1.0, 700.0]),
        ("A", 3_600_000, [4.0, 4.5, 1200.0]),
        ("C", 60_000, [10.0, 20.0, 30.0]),
    ]:
        for i, amount in enumerate(amounts):
            rows.append({"card": card, "ts": T0 + start + i * 60_000, "amount": amount,
                         "merchant": "shop" if amount < 5 else "store"})
    rows.append({"card": "A", "ts": T0 + 1_800_000, "amount": 40.0, "merchant": "cafe"})
    return sorted(rows, key=lambda r: r["ts"])


def small_then_big() -> Pattern:
    return (Pattern.begin("small").where(col("amount") < 5).times(2).consecutive()
            .next("big").where(col("amount") > 500).within(timedelta(minutes=10)))


def spans(fig) -> list:
    return [p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("match-")]


def stage_points(fig, stage: str) -> list[tuple[float, float]]:
    found = [c for c in fig.axes[0].collections if c.get_gid() == f"stage-{stage}"]
    return [tuple(xy) for c in found for xy in c.get_offsets().tolist()]


def test_plot_highlights_each_match_of_the_key_and_marks_its_events() -> None:
    import matplotlib.dates as mdates

    fig = plot_key(card_events(), small_then_big(), key="card", time="ts", value="amount",
                   key_value="A")
    assert len(spans(fig)) == 2
    smalls, bigs = stage_points(fig, "small"), stage_points(fig, "big")
    assert [y for _, y in smalls] == [1.0, 2.0, 4.0, 4.5]
    assert [y for _, y in bigs] == [900.0, 1200.0]
    expected = [mdates.date2num(datetime.fromtimestamp((T0 + ms) / 1000, UTC))
                for ms in (120_000, 3_720_000)]
    assert [x for x, _ in bigs] == pytest.approx(expected)
    for span, (x, _) in zip(spans(fig), bigs, strict=True):  # each span ends at its big event
        assert span.get_x() + span.get_width() == pytest.approx(x)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["amount (7 events)", "match", "small (4)", "big (2)"]
    assert fig.axes[0].get_title(loc="left") == "card = A: 7 events, 2 matches"


def test_plot_time_axis_is_utc_datetimes() -> None:
    fig = plot_key(card_events(), small_then_big(), key="card", time="ts", value="amount",
                   key_value="B")
    line = next(line for line in fig.axes[0].lines if line.get_gid() == "events")
    first = line.get_xdata()[0]
    assert first == datetime(2024, 3, 5, 0, 53, 50, tzinfo=UTC)
    assert fig.axes[0].get_xlabel() == "time (UTC)"
    assert len(spans(fig)) == 1


def test_plot_takes_matches_found_before_and_keeps_the_keys_own() -> None:
    from cep import match

    matches = match(card_events(), small_then_big(), key="card", time="ts")
    assert len(matches) == 3
    fig = plot_key(card_events(), matches, key="card", time="ts", key_value="B")
    assert len(spans(fig)) == 1
    assert [y for _, y in stage_points(fig, "small")] == [0.0, 0.0]  # no value: one row
    none = plot_key(card_events(), matches, key="card", time="ts", key_value="C")
    assert spans(none) == [] and stage_points(none, "small") == []


def test_plot_draws_a_row_per_category_of_a_non_numeric_value() -> None:
    fig = plot_key(card_events(), small_then_big(), key="card", time="ts", value="merchant",
                   key_value="A")
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks == ["shop", "store", "cafe"]
    assert [y for _, y in stage_points(fig, "big")] == [1.0, 1.0]


def test_plot_finds_an_integer_key_typed_as_text_and_a_time_range() -> None:
    rows = [dict(r, card={"A": 7, "B": 8, "C": 9}[r["card"]]) for r in card_events()]
    ke = key_events(rows, small_then_big(), key="card", time="ts", key_value="7",
                    between=(T0 + 3_000_000, T0 + 4_000_000))
    assert ke.key_value == 7
    assert len(ke.matches) == 1 and ke.matches[0].start == T0 + 3_600_000
    assert ke.times == [T0 + 3_600_000 + i * 60_000 for i in range(3)]
    since = key_events(rows, small_then_big(), key="card", time="ts", key_value=7,
                       between=("2024-03-05T01:20:00+00:00", None))
    assert since.between == (T0 + 1_600_000, T0 + 3_720_000)  # open end: the last event
    assert [m.start for m in since.matches] == [T0 + 3_600_000]
    with pytest.raises(InputError, match="before the start"):
        key_events(rows, small_then_big(), key="card", time="ts", key_value=7,
                   between=(T0 + 10, T0))


def test_plot_of_a_key_without_events_names_the_key() -> None:
    with pytest.raises(InputError, match=r"key 'Z': no events with card = 'Z'.*keys: A, B, C"):
        plot_key(card_events(), small_then_big(), key="card", time="ts", key_value="Z")


def test_plot_saves_png_svg_and_refuses_other_suffixes(tmp_path: Path) -> None:
    fig = plot_key(card_events(), small_then_big(), key="card", time="ts", value="amount",
                   key_value="A", path=tmp_path / "a.png")
    width, height = png_size((tmp_path / "a.png").read_bytes())
    assert 800 <= width <= 3000 and 300 <= height <= 1500
    save_figure(fig, tmp_path / "a.svg")
    assert "card = A: 7 events, 2 matches" in svg_texts((tmp_path / "a.svg").read_text())
    with pytest.raises(VisualizationError, match="cannot tell the image format"):
        save_figure(fig, tmp_path / "a.gif")


def test_cep_plot_writes_a_png(tmp_path: Path, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "cards.parquet"
    pq.write_table(pa.Table.from_pylist(card_events()), data)
    rules = tmp_path / "rules.py"
    rules.write_text(
        "from datetime import timedelta\nfrom cep import Pattern, col\n"
        "rule = (Pattern.begin('small').where(col('amount') < 5).times(2).consecutive()\n"
        "        .next('big').where(col('amount') > 500).within(timedelta(minutes=10)))\n"
    )
    out = tmp_path / "A.png"
    code = main(["plot", f"{rules}:rule", str(data), "--key", "card", "--time", "ts",
                 "--value", "amount", "--for", "A", "-o", str(out)])
    assert code == 0
    assert out.read_bytes()[:8] == PNG_SIGNATURE
    assert capsys.readouterr().out == f"{out}: card = A, 7 events, 2 matches\n"
    code = main(["plot", f"{rules}:rule", str(data), "--key", "card", "--time", "ts",
                 "--for", "Z", "-o", str(out)])
    assert code == 2
    assert "key 'Z': no events with card = 'Z'" in capsys.readouterr().err
    code = main(["plot", f"{rules}:rule", str(data), "--key", "card", "--time", "ts",
                 "--for", "A", "--from", "2024-03-05T01:20:00Z", "-o", str(out)])
    assert code == 0
    assert capsys.readouterr().out == f"{out}: card = A, 4 events, 1 match\n"
    with pytest.raises(SystemExit) as exit_:
        main(["plot", f"{rules}:rule", str(data), "--key", "card", "--time", "ts",
              "--for", "A", "-o", str(tmp_path / "A.gif")])
    assert exit_.value.code == 2
    assert "use .png, .svg or .pdf" in capsys.readouterr().err
