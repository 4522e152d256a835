"""Pictures of a compiled NFA (``Pattern.to_svg()``, ``Pattern.to_png()``, ``cep explain``).

Graphviz's ``dot`` draws :func:`cep.nfa.explain.to_dot` when it is on PATH; without it (no
system packages needed) matplotlib draws the same graph with its own left-to-right layout:

* states go into columns by their longest distance from the start state (edges that close a
  cycle are set aside first), the main line of the pattern (the path from start to final
  through the most stage states) on one row, the other states above it (loop and IGNORE
  states) or below it (STOP / PENDING states of negations);
* self-loops are drawn as loops, edges that would cross a state bend around it as arcs;
* TAKE edges are solid, IGNORE dashed, PROCEED dotted, each labelled with its condition;
  states are coloured by kind; a legend names both.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from cep.errors import VisualizationError
from cep.nfa.explain import _ordered, to_dot
from cep.nfa.figures import figure_bytes, new_figure
from cep.nfa.model import NAME_DELIMITER, NFA, Action, State, StateKind, Transition

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Renderer = Literal["auto", "graphviz", "matplotlib"]
ImageFormat = Literal["svg", "png"]
RENDERERS: tuple[str, ...] = ("auto", "graphviz", "matplotlib")
IMAGE_FORMATS: tuple[str, ...] = ("svg", "png")

# geometry, in inches (the figure is drawn at 1 data unit = 1 inch)
_NODE_FONT = 9.0  # points
_LABEL_FONT = 7.0
_NODE_CHAR = 0.58 * _NODE_FONT / 72  # average width of a DejaVu Sans character
_LABEL_CHAR = 0.602 * _LABEL_FONT / 72  # DejaVu Sans Mono advance
_LABEL_LINE = 1.25 * _LABEL_FONT / 72
_MIN_RADIUS = 0.3
_ROW = 1.45  # distance between rows
_MIN_GAP = 1.5  # minimum distance between columns
_WRAP = 30  # characters per line of an edge label
_LOOP = 0.42  # how far a self-loop reaches out of its state

_EDGE_COLOR = {Action.TAKE: "#1f4e9c", Action.IGNORE: "#7f7f7f", Action.PROCEED: "#c05a00"}
_EDGE_LINE = {Action.TAKE: "-", Action.IGNORE: (0, (5, 3)), Action.PROCEED: (0, (1.2, 2))}
_STATE_FILL = {
    StateKind.START: "#dcefd8", StateKind.NORMAL: "#e8eef8", StateKind.FINAL: "#fdebc8",
    StateKind.STOP: "#f6d2d2", StateKind.PENDING: "#fbe1c4",
}
_STATE_EDGE = {
    StateKind.START: "#2e7d32", StateKind.NORMAL: "#3a4a63", StateKind.FINAL: "#a86b00",
    StateKind.STOP: "#b02a2a", StateKind.PENDING: "#b25d00",
}


def graphviz_available() -> bool:
    """Whether Graphviz's ``dot`` program is on PATH.

    >>> isinstance(graphviz_available(), bool)
    True
    """
    return shutil.which("dot") is not None


def render(nfa: NFA, fmt: str = "svg", renderer: str = "auto", dpi: float = 120) -> bytes:
    """The NFA as an SVG or PNG image (bytes).

    ``renderer``: ``"graphviz"`` runs ``dot`` on :func:`cep.nfa.explain.to_dot`, ``"matplotlib"``
    draws it with :func:`draw`, ``"auto"`` uses Graphviz when ``dot`` is on PATH.  ``dpi``
    applies to PNG from matplotlib.  The same NFA always gives the same bytes.

    >>> from cep import Pattern
    >>> from cep.nfa.compiler import compile_pattern
    >>> render(compile_pattern(Pattern.begin("a")), "svg")[:5]
    b'<?xml'
    """
    if fmt not in IMAGE_FORMATS:
        raise VisualizationError(f"unknown image format {fmt!r}: use {' or '.join(IMAGE_FORMATS)}")
    if renderer not in RENDERERS:
        raise VisualizationError(f"unknown renderer {renderer!r}: use {', '.join(RENDERERS)}")
    if renderer == "graphviz" or (renderer == "auto" and graphviz_available()):
        return _graphviz(nfa, fmt)
    fig = draw(nfa)
    return figure_bytes(fig, fmt, dpi)


def _graphviz(nfa: NFA, fmt: str) -> bytes:
    dot = shutil.which("dot")
    if dot is None:
        raise VisualizationError(
            "renderer 'graphviz' needs Graphviz's dot program on PATH "
            "(or use renderer 'matplotlib': pip install 'cep[viz]')"
        )
    try:
        done = subprocess.run(
            [dot, f"-T{fmt}"], input=to_dot(nfa).encode(), capture_output=True, timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise VisualizationError(f"running {dot} failed: {err}") from err
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise VisualizationError(f"{dot} -T{fmt} failed (exit {done.returncode}): {message}")
    return done.stdout


# ------------------------------------------------------------------ layout


@dataclass
class NodeBox:
    """Where a state is drawn: centre, radius, column and row, and what is written in it."""

    state: State
    x: float
    y: float
    radius: float
    layer: int
    row: int
    note: str | None = None  # e.g. a gap window, written under the state


@dataclass
class EdgeRoute:
    """How a transition is drawn: an arc (``rad`` as in matplotlib's ``arc3``) or a self-loop
    on ``side`` (+1 above the state, -1 below), and where its label sits."""

    transition: Transition
    label: list[str]
    rad: float = 0.0
    loop_side: int = 0  # 0: not a self-loop
    loop_size: float = _LOOP
    label_at: tuple[float, float] = (0.0, 0.0)
    label_va: str = "center"


@dataclass
class Layout:
    """The NFA placed left to right: states, edge routes and the extent of the drawing."""

    nodes: dict[str, NodeBox]
    edges: list[EdgeRoute]
    bounds: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # xmin, ymin, xmax, ymax
    title: str = ""
    kinds: list[StateKind] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


def layout(nfa: NFA) -> Layout:
    """Place the states and route the edges of ``nfa`` (see the module docstring).

    >>> from cep import Pattern
    >>> from cep.nfa.compiler import compile_pattern
    >>> sorted(layout(compile_pattern(Pattern.begin("a"))).nodes)
    ['$endState$', 'a']
    """
    states = _ordered(nfa)
    back, topo = _back_edges(nfa, states)
    layer = _layers(nfa, states, back, topo)
    spine = _spine(nfa, states, back, topo, layer)
    rows = _rows(states, back, topo, layer, spine)

    labels = {id(t): _label(t) for s in states for t in s.transitions}
    double = (StateKind.FINAL, StateKind.PENDING)  # drawn with a second, inner outline
    radius = {s.name: max(_MIN_RADIUS, len(s.name) * _NODE_CHAR / 2 + 0.1)
              + (0.06 if s.kind in double else 0.0) for s in states}
    loops = {s.name: [t for t in s.transitions if t.target is s] for s in states}
    by_cell = {(layer[s.name], rows[s.name]) for s in states}

    # column positions: wide enough for the labels of the edges between neighbouring columns
    n_layers = max(layer.values()) + 1
    gap = [_MIN_GAP] * n_layers
    for s in states:
        for t in s.transitions:
            a, b = layer[s.name], layer[t.target.name]
            if t.target is s or abs(a - b) != 1:
                continue
            width = _label_width(labels[id(t)]) + radius[s.name] + radius[t.target.name] + 0.35
            gap[min(a, b)] = max(gap[min(a, b)], width)
    loop_width = [0.0] * n_layers
    for s in states:
        for t in loops[s.name]:
            loop_width[layer[s.name]] = max(loop_width[layer[s.name]], _label_width(labels[id(t)]))
    for i in range(n_layers - 1):
        gap[i] = max(gap[i], (loop_width[i] + loop_width[i + 1]) / 2 + 0.3)
    xs = [0.0]
    for i in range(n_layers - 1):
        xs.append(xs[-1] + gap[i])

    gaps = nfa.windows
    nodes = {
        s.name: NodeBox(
            s, xs[layer[s.name]], rows[s.name] * _ROW, radius[s.name], layer[s.name], rows[s.name],
            None if s.name not in gaps else f"gap {_duration(gaps[s.name])}",
        )
        for s in states
    }
    edges: list[EdgeRoute] = []
    for s in states:
        node = nodes[s.name]
        own = loops[s.name]
        for i, t in enumerate(own):
            edges.append(_loop_route(t, labels[id(t)], node, i, by_cell))
    pairs: dict[frozenset[str], list[Transition]] = {}
    for s in states:
        for t in s.transitions:
            if t.target is not s:
                pairs.setdefault(frozenset((s.name, t.target.name)), []).append(t)
    obstacles = _obstacles(nodes, edges)
    for s in states:
        for t in s.transitions:
            if t.target is s:
                continue
            group = pairs[frozenset((s.name, t.target.name))]
            edges.append(_arc_route(t, labels[id(t)], nodes, group, obstacles))

    _place_labels(nodes, edges)

    window = f"within {_duration(nfa.window)}" if nfa.window else "no window"
    skip = repr(nfa.skip).removeprefix("SkipStrategy.")
    title = f"NFA: {len(states)} states, {window}, skip {skip}"
    kinds = [k for k in StateKind if any(s.kind is k for s in states)]
    actions = [a for a in Action if any(t.action is a for s in states for t in s.transitions)]
    result = Layout(nodes, edges, title=title, kinds=kinds, actions=actions)
    result.bounds = _bounds(result)
    return result


def _back_edges(nfa: NFA, states: list[State]) -> tuple[set[int], list[State]]:
    """Transitions that close a cycle (depth first from the start state, then from any state
    not reached), and the states in a topological order of the remaining edges."""
    mark: dict[str, int] = {}  # 1 on the stack, 2 done
    back: set[int] = set()
    post: list[State] = []
    for root in [nfa.start, *states]:
        if root.name in mark:
            continue
        mark[root.name] = 1
        stack = [(root, iter(root.transitions))]
        while stack:
            state, todo = stack[-1]
            for t in todo:
                seen = mark.get(t.target.name)
                if seen == 1:
                    back.add(id(t))
                elif seen is None:
                    mark[t.target.name] = 1
                    stack.append((t.target, iter(t.target.transitions)))
                    break
            else:
                stack.pop()
                mark[state.name] = 2
                post.append(state)
    return back, post[::-1]


def _forward(state: State, back: set[int]) -> list[Transition]:
    return [t for t in state.transitions if id(t) not in back and t.target is not state]


def _layers(nfa: NFA, states: list[State], back: set[int], topo: list[State]) -> dict[str, int]:
    """Longest distance from the start; states the start cannot reach go after the rest."""
    reached = {nfa.start.name}
    layer = {s.name: 0 for s in states}
    for s in topo:
        for t in _forward(s, back):
            if s.name in reached:
                reached.add(t.target.name)
                layer[t.target.name] = max(layer[t.target.name], layer[s.name] + 1)
    last = max((layer[n] for n in reached), default=0)
    for s in topo:  # unreachable (e.g. the final state behind a trailing not_followed_by)
        if s.name not in reached:
            layer[s.name] = max(layer[s.name], last + 1)
            for t in _forward(s, back):
                if t.target.name not in reached:
                    layer[t.target.name] = max(layer[t.target.name], layer[s.name] + 1)
    return layer


def _primary(state: State) -> bool:
    return NAME_DELIMITER not in state.name or state.kind in (StateKind.START, StateKind.FINAL)


def _spine(
    nfa: NFA, states: list[State], back: set[int], topo: list[State], layer: dict[str, int]
) -> list[str]:
    """The main line: from the start state to a final one (else to the last column) through
    the most stage states (``b`` rather than ``b:0``), then the fewest IGNORE edges (those
    lead to the states that wait between events), then the longest, then the most TAKEs."""
    best: dict[str, tuple[int, int, int, int]] = {nfa.start.name: (1, 0, 0, 0)}
    parent: dict[str, str] = {}
    for s in topo:
        if s.name not in best:
            continue
        p, ignores, length, takes = best[s.name]
        for t in _forward(s, back):
            score = (p + _primary(t.target), ignores - (t.action is Action.IGNORE), length + 1,
                     takes + (t.action is Action.TAKE))
            if t.target.name not in best or score > best[t.target.name]:
                best[t.target.name] = score
                parent[t.target.name] = s.name
    finals = [s.name for s in states if s.is_final and s.name in best]
    ends = finals or sorted(best, key=lambda n: layer[n])[-1:]
    end = max(ends, key=lambda n: best[n])
    path = [end]
    while path[-1] in parent:
        path.append(parent[path[-1]])
    return path[::-1]


def _rows(
    states: list[State], back: set[int], topo: list[State], layer: dict[str, int], spine: list[str]
) -> dict[str, int]:
    """Row 0 for the spine; the others as close to their placed neighbours as a free row of
    their column allows, above the spine, or below it for STOP / PENDING states."""
    rows = {name: 0 for name in spine}
    taken = {(layer[name], 0) for name in spine}
    neighbours: dict[str, list[str]] = {s.name: [] for s in states}
    for s in states:
        for t in s.transitions:
            if t.target is not s:
                neighbours[s.name].append(t.target.name)
                neighbours[t.target.name].append(s.name)
    for s in sorted(topo, key=lambda st: layer[st.name]):
        if s.name in rows:
            continue
        placed = [rows[n] for n in neighbours[s.name] if n in rows]
        desired = sum(placed) / len(placed) if placed else 0.0
        side = -1 if s.kind in (StateKind.STOP, StateKind.PENDING) else 1
        candidates = [r for k in range(1, len(states) + 1) for r in (k, -k)]
        if not placed:  # nothing to be near (e.g. a final state only a timeout reaches)
            candidates.insert(0, 0)
        free = [r for r in candidates if (layer[s.name], r) not in taken]
        row = min(
            free,
            key=lambda r: (abs(r - desired) + (0.75 if (r > 0) != (side > 0) else 0.0), abs(r)),
        )
        rows[s.name] = row
        taken.add((layer[s.name], row))
    return rows


def _label(t: Transition) -> list[str]:
    if t.condition is None:
        return []
    return _wrap(repr(t.condition))


def _wrap(text: str, width: int = _WRAP) -> list[str]:
    """Lines of at most ``width`` characters, broken after ``&`` / ``|`` where possible."""
    if len(text) <= width:
        return [text]
    chunks = [c for c in re.split(r"(?<= [&|]) ", text) if c]
    lines: list[str] = []
    for chunk in chunks:
        if lines and len(lines[-1]) + 1 + len(chunk) <= width:
            lines[-1] += " " + chunk
        elif len(chunk) <= 2 * width:
            lines.append(chunk)
        else:
            lines += textwrap.wrap(chunk, width, break_long_words=False, break_on_hyphens=False)
    return lines


def _label_width(lines: list[str]) -> float:
    return max((len(line) for line in lines), default=0) * _LABEL_CHAR + 0.1


def _label_height(lines: list[str]) -> float:
    return len(lines) * _LABEL_LINE + 0.06


def _loop_route(
    t: Transition, label: list[str], node: NodeBox, index: int, cells: set[tuple[int, int]]
) -> EdgeRoute:
    """Self-loops go to the side of the state with no neighbour (above first for the spine
    and the rows above it); a second loop goes to the other side, a third is drawn larger."""
    outward = 1 if node.row >= 0 else -1
    if (node.layer, node.row + outward) in cells and (node.layer, node.row - outward) not in cells:
        outward = -outward
    side = outward if index % 2 == 0 else -outward
    size = _LOOP * (1 + 0.6 * (index // 2))
    top = node.y + side * (node.radius + size)
    at = (node.x, top + side * 0.04)
    return EdgeRoute(t, label, loop_side=side, loop_size=size, label_at=at,
                     label_va="bottom" if side > 0 else "top")


def _obstacles(nodes: dict[str, NodeBox], loops: list[EdgeRoute]) -> list[tuple[float, float, float, str]]:
    """Circles an arc should avoid: states, and the loops and loop labels drawn beside them."""
    found = [(n.x, n.y, n.radius + 0.12, name) for name, n in nodes.items()]
    for e in loops:
        node = nodes[e.transition.source.name]
        reach = node.radius + e.loop_size
        found.append((node.x, node.y + e.loop_side * reach * 0.75, e.loop_size * 0.6, node.state.name))
        if e.label:
            ly = e.label_at[1] + e.loop_side * _label_height(e.label) / 2
            found.append((node.x, ly, _label_height(e.label) / 2 + 0.05, node.state.name))
    return found


def _arc_point(p: tuple[float, float], q: tuple[float, float], rad: float, t: float) -> tuple[float, float]:
    """A point of matplotlib's ``arc3`` curve from p to q (a quadratic Bezier)."""
    cx = (p[0] + q[0]) / 2 + rad * (q[1] - p[1])
    cy = (p[1] + q[1]) / 2 - rad * (q[0] - p[0])
    u = 1 - t
    return (u * u * p[0] + 2 * u * t * cx + t * t * q[0], u * u * p[1] + 2 * u * t * cy + t * t * q[1])


def _arc_route(
    t: Transition,
    label: list[str],
    nodes: dict[str, NodeBox],
    group: list[Transition],
    obstacles: list[tuple[float, float, float, str]],
) -> EdgeRoute:
    """An arc from state to state: straight when nothing is in the way and no other edge joins
    the same two states, else bent (outwards from the spine first) just enough to clear."""
    # edges of one pair of states share a canonical direction so their bends fan out
    first, second = sorted((t.source.name, t.target.name))
    sign = 1 if t.source.name == first else -1
    cp, cq = (nodes[first].x, nodes[first].y), (nodes[second].x, nodes[second].y)
    dx = cq[0] - cp[0]
    # arc3 bends by -rad * dx vertically: bend up above the spine, down on and below it
    down = (nodes[first].row + nodes[second].row) <= 0
    outward = 1 if dx == 0 else (1 if (dx > 0) == down else -1)
    ends = {t.source.name, t.target.name}

    def clear(rad: float) -> bool:
        for i in range(1, 20):
            x, y = _arc_point(cp, cq, rad, i / 20)
            for ox, oy, r, owner in obstacles:
                if owner not in ends and math.hypot(x - ox, y - oy) < r:
                    return False
        return True

    n = len(group)
    spread = [(i - (n - 1) / 2) * 0.3 for i in range(n)]
    offset = spread[group.index(t)]
    bases = [0.0] + [s * r for r in (0.18, 0.3, 0.45, 0.6, 0.8) for s in (outward, -outward)]
    base = next(
        (r for r in bases if all(clear(r + d) for d in spread)), bases[-2]
    )
    rad = base + offset
    mid = _arc_point(cp, cq, rad, 0.5)
    return EdgeRoute(t, label, rad=rad * sign, label_at=mid)


Box = tuple[float, float, float, float]  # xmin, ymin, xmax, ymax


def _box(x: float, y: float, lines: list[str], va: str = "center") -> Box:
    w, h = _label_width(lines), _label_height(lines)
    y0 = {"center": y - h / 2, "bottom": y, "top": y - h}[va]
    return (x - w / 2, y0, x + w / 2, y0 + h)


def _overlap(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _place_labels(nodes: dict[str, NodeBox], edges: list[EdgeRoute]) -> None:
    """Move each arc's label along its arc (then to either side of it) to the first place that
    covers no state and no label placed before it; shorter arcs choose first."""
    taken: list[Box] = [(n.x - n.radius, n.y - n.radius, n.x + n.radius, n.y + n.radius)
                        for n in nodes.values()]
    taken += [_box(*e.label_at, e.label, e.label_va) for e in edges if e.loop_side and e.label]

    def length(e: EdgeRoute) -> float:
        a, b = nodes[e.transition.source.name], nodes[e.transition.target.name]
        return math.hypot(a.x - b.x, a.y - b.y)

    lines: list[tuple[int, float, float]] = []  # points along every arc, to keep labels off
    for e in edges:
        if not e.loop_side:
            a, b = nodes[e.transition.source.name], nodes[e.transition.target.name]
            steps = max(2, int(length(e) / 0.08))
            lines += [(id(e), *_arc_point((a.x, a.y), (b.x, b.y), e.rad, i / steps))
                      for i in range(steps + 1)]

    def cost(e: EdgeRoute, box: Box) -> float:
        covered = sum(_overlap(box, other) for other in taken)
        crossed = sum(1 for owner, x, y in lines
                      if owner != id(e) and box[0] <= x <= box[2] and box[1] <= y <= box[3])
        return covered + 0.02 * crossed

    arcs = sorted((e for e in edges if not e.loop_side and e.label), key=length)
    for e in arcs:
        a, b = nodes[e.transition.source.name], nodes[e.transition.target.name]
        p, q = (a.x, a.y), (b.x, b.y)
        h = _label_height(e.label)
        spots = [_arc_point(p, q, e.rad, t) for t in (0.5, 0.42, 0.58, 0.34, 0.66, 0.27, 0.73)]
        spots += [(x, y + d) for d in (h / 2 + 0.05, -h / 2 - 0.05) for x, y in spots[:5]]
        scored = [(cost(e, _box(x, y, e.label)), i) for i, (x, y) in enumerate(spots)]
        e.label_at = spots[min(scored)[1]]
        taken.append(_box(*e.label_at, e.label))


def _bounds(lay: Layout) -> tuple[float, float, float, float]:
    xs: list[float] = []
    ys: list[float] = []
    for n in lay.nodes.values():
        xs += [n.x - n.radius, n.x + n.radius]
        ys += [n.y - n.radius - (0.25 if n.note else 0.0), n.y + n.radius]
    start = next(n for n in lay.nodes.values() if n.state.is_start) if any(
        n.state.is_start for n in lay.nodes.values()) else None
    if start is not None:
        xs.append(start.x - start.radius - 0.45)
    for e in lay.edges:
        w, h = _label_width(e.label), _label_height(e.label)
        x, y = e.label_at
        xs += [x - w / 2, x + w / 2]
        if e.loop_side:
            node = lay.nodes[e.transition.source.name]
            ys.append(node.y + e.loop_side * (node.radius + e.loop_size))
            ys.append(y + e.loop_side * h if e.label else y)
        else:
            a, b = lay.nodes[e.transition.source.name], lay.nodes[e.transition.target.name]
            for i in range(0, 11):
                px, py = _arc_point((a.x, a.y), (b.x, b.y), e.rad, i / 10)
                ys.append(py)
            ys += [y - h / 2, y + h / 2]
    return min(xs), min(ys), max(xs), max(ys)


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


# ------------------------------------------------------------------ drawing


def draw(nfa: NFA) -> Figure:
    """The NFA drawn with matplotlib (Agg canvas): a Figure sized so that one unit is one inch.

    >>> from pathlib import Path
    >>> from cep import Pattern
    >>> from cep.nfa.compiler import compile_pattern
    >>> draw(compile_pattern(Pattern.begin("a"))).savefig("a.svg")
    >>> Path("a.svg").exists()
    True
    """
    from matplotlib.lines import Line2D

    lay = layout(nfa)
    xmin, ymin, xmax, ymax = lay.bounds
    pad, top, bottom = 0.25, 0.45, 0.5
    legend_width = 1.05 * (len(lay.kinds) + len(lay.actions)) + 0.4
    width = max(xmax - xmin + 2 * pad, legend_width, len(lay.title) * _NODE_CHAR + 0.5)
    extra = width - (xmax - xmin + 2 * pad)
    height = ymax - ymin + 2 * pad + top + bottom
    fig = new_figure(width, height)
    ax = fig.add_axes((0.0, bottom / height, 1.0, (ymax - ymin + 2 * pad) / height))
    ax.set_xlim(xmin - pad - extra / 2, xmax + pad + extra / 2)
    ax.set_ylim(ymin - pad, ymax + pad)
    ax.set_axis_off()

    for e in lay.edges:
        _draw_edge(ax, lay, e)
    for n in lay.nodes.values():
        _draw_node(ax, n)

    fig.text(0.5 * pad / width, 1 - 0.3 / height, lay.title, fontsize=10, ha="left",
             va="center", color="#222222", parse_math=False)
    handles = [
        Line2D([], [], color=_EDGE_COLOR[a], linestyle=_EDGE_LINE[a], linewidth=1.6,
               label=a.value)
        for a in lay.actions
    ] + [
        Line2D([], [], linestyle="none", marker="8" if k in (StateKind.STOP, StateKind.PENDING)
               else "o", markersize=11, markerfacecolor=_STATE_FILL[k],
               markeredgecolor=_STATE_EDGE[k], label=f"{k.value} state")
        for k in lay.kinds
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
               fontsize=8, bbox_to_anchor=(0.5, 0.05 / height), handlelength=2.6,
               columnspacing=1.2)
    return fig


def _draw_node(ax: Axes, n: NodeBox) -> None:
    from matplotlib.patches import Circle, FancyArrowPatch, RegularPolygon

    kind = n.state.kind
    style = {"facecolor": _STATE_FILL[kind], "edgecolor": _STATE_EDGE[kind], "linewidth": 1.4,
             "zorder": 3}
    if kind in (StateKind.STOP, StateKind.PENDING):
        outer = n.radius / math.cos(math.pi / 8)
        ax.add_patch(RegularPolygon((n.x, n.y), 8, radius=outer, orientation=math.pi / 8, **style))
        if kind is StateKind.PENDING:
            ax.add_patch(RegularPolygon((n.x, n.y), 8, radius=outer - 0.06,
                                        orientation=math.pi / 8, fill=False,
                                        edgecolor=_STATE_EDGE[kind], linewidth=1.0, zorder=3))
    else:
        ax.add_patch(Circle((n.x, n.y), n.radius, **style))
        if kind is StateKind.FINAL:
            ax.add_patch(Circle((n.x, n.y), n.radius - 0.06, fill=False,
                                edgecolor=_STATE_EDGE[kind], linewidth=1.0, zorder=3))
    ax.text(n.x, n.y, n.state.name, ha="center", va="center", fontsize=_NODE_FONT, zorder=4,
            color="#111111", parse_math=False)
    if n.note:
        ax.text(n.x, n.y - n.radius - 0.05, n.note, ha="center", va="top", fontsize=7,
                style="italic", color="#555555", zorder=4, parse_math=False)
    if n.state.is_start:
        ax.add_patch(FancyArrowPatch((n.x - n.radius - 0.45, n.y), (n.x - n.radius, n.y),
                                     arrowstyle="-|>", mutation_scale=12, color="#2e7d32",
                                     linewidth=1.4, zorder=2))


def _draw_edge(ax: Axes, lay: Layout, e: EdgeRoute) -> None:
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path as MplPath

    action = e.transition.action
    color = _EDGE_COLOR[action]
    style = {"arrowstyle": "-|>", "mutation_scale": 11, "color": color, "linewidth": 1.3,
             "linestyle": _EDGE_LINE[action], "zorder": 2}
    a = lay.nodes[e.transition.source.name]
    if e.loop_side:
        s, r, size = e.loop_side, a.radius, e.loop_size
        start_angle, end_angle = math.radians(90 + 35), math.radians(90 - 35)
        p0 = (a.x + r * math.cos(start_angle), a.y + s * r * math.sin(start_angle))
        p3 = (a.x + r * math.cos(end_angle), a.y + s * r * math.sin(end_angle))
        reach = (r + size * 1.3)
        c1 = (a.x - 0.75 * size - 0.1, a.y + s * reach)
        c2 = (a.x + 0.75 * size + 0.1, a.y + s * reach)
        path = MplPath([p0, c1, c2, p3],
                       [MplPath.MOVETO, MplPath.CURVE4, MplPath.CURVE4, MplPath.CURVE4])
        ax.add_patch(FancyArrowPatch(path=path, **style))
    else:
        b = lay.nodes[e.transition.target.name]
        ax.add_patch(FancyArrowPatch(
            (a.x, a.y), (b.x, b.y), connectionstyle=f"arc3,rad={e.rad:.4f}",
            shrinkA=a.radius * 72 + 1, shrinkB=b.radius * 72 + 1.5, **style))
    if e.label:
        ax.text(*e.label_at, "\n".join(e.label), ha="center", va=e.label_va,
                fontsize=_LABEL_FONT, family="DejaVu Sans Mono", color=color, zorder=5,
                linespacing=1.1, parse_math=False,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                      "alpha": 0.9})
