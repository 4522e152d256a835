"""Text rendering of a compiled NFA (``Pattern.explain()``)."""

from __future__ import annotations

from cep.nfa.model import NFA, State, StateKind

_SHAPES = {
    StateKind.START: "circle", StateKind.NORMAL: "circle", StateKind.FINAL: "doublecircle",
    StateKind.STOP: "octagon", StateKind.PENDING: "doubleoctagon",
}
_EDGE_STYLE = {"TAKE": "solid", "IGNORE": "dashed", "PROCEED": "dotted"}


def describe(nfa: NFA) -> str:
    """One line per state, one indented line per edge, start state first."""
    window = f"within {nfa.window} ms" if nfa.window else "no window"
    lines = [f"NFA ({len(nfa.states)} states, {window}, skip {nfa.skip!r})"]
    for name, ms in sorted(nfa.windows.items()):
        lines.append(f"  gap window: state {name!r} times out {ms} ms after the previous event")
    for state in _ordered(nfa):
        lines.append(f"{state.name} [{state.kind.value}]")
        for t in state.transitions:
            cond = "" if t.condition is None else f" if {t.condition!r}"
            lines.append(f"    {t.action.value:<7} -> {t.target.name}{cond}")
    return "\n".join(lines)


def _ordered(nfa: NFA) -> list[State]:
    seen: dict[str, State] = {}
    todo = [nfa.start]
    while todo:
        state = todo.pop(0)
        if state.name in seen:
            continue
        seen[state.name] = state
        todo.extend(t.target for t in state.transitions)
    rest = [s for n, s in nfa.states.items() if n not in seen]
    return list(seen.values()) + rest


def to_dot(nfa: NFA) -> str:
    """The NFA as Graphviz DOT: a node per state (final states double-circled, stop states
    octagons), an edge per transition labelled with its action and condition (TAKE solid,
    IGNORE dashed, PROCEED dotted)."""
    window = f"within {nfa.window} ms, " if nfa.window else ""
    lines = [
        "digraph NFA {",
        "  rankdir=LR;",
        f"  label={_quote(f'{window}skip {nfa.skip!r}')};",
        '  node [fontname="Helvetica"]; edge [fontname="Helvetica", fontsize=10];',
        '  "" [shape=none, width=0, height=0, label=""];',
        f'  "" -> {_quote(nfa.start.name)};',
    ]
    for state in _ordered(nfa):
        gap = nfa.windows.get(state.name)
        label = state.name if gap is None else f"{state.name}\n(gap {gap} ms)"
        lines.append(f"  {_quote(state.name)} [shape={_SHAPES[state.kind]}, "
                     f"label={_quote(label)}];")
        for t in state.transitions:
            text = t.action.value if t.condition is None else f"{t.action.value}\n{t.condition!r}"
            lines.append(f"  {_quote(state.name)} -> {_quote(t.target.name)} "
                         f"[label={_quote(text)}, style={_EDGE_STYLE[t.action.value]}];")
    lines.append("}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
