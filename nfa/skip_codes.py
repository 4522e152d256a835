"""Skip strategies as the numba kernel's integer codes."""

from __future__ import annotations

from cep.nfa.kernel import S_FIRST, S_LAST, S_NEXT, S_NONE, S_PAST_LAST
from cep.skip import SkipKind, SkipStrategy

_CODES = {
    SkipKind.NO_SKIP: S_NONE,
    SkipKind.SKIP_TO_NEXT: S_NEXT,
    SkipKind.SKIP_PAST_LAST_EVENT: S_PAST_LAST,
    SkipKind.SKIP_TO_FIRST: S_FIRST,
    SkipKind.SKIP_TO_LAST: S_LAST,
}


def skip_code(skip: SkipStrategy, stages: list[str]) -> tuple[int, int]:
    """(kind code, stage index or -1)."""
    stage = stages.index(skip.stage) if skip.stage is not None else -1
    return _CODES[skip.kind], stage
