"""Text rendering of a compiled NFA (``Pattern.explain()``)."""

from __future__ import annotations

from nfa.model import NFA, State


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
