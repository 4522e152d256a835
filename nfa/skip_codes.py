"""Skip strategies as the numba kernel's integer codes."""

from __future__ import annotations

from cep.skip import SkipKind, SkipStrategy

_CODES = {
    SkipKind.NO_SKIP: 0,
    SkipKind.SKIP_TO_NEXT: 1,
    SkipKind.SKIP_PAST_LAST_EVENT: 2,
    SkipKind.SKIP_TO_FIRST: 3,
    SkipKind.SKIP_TO_LAST: 4,
}


def skip_code(skip: SkipStrategy, stages: list[str]) -> tuple[int, int]:
    """(kind code, stage index or -1)."""
    stage = stages.index(skip.stage) if skip.stage is not None else -1
    return _CODES[skip.kind], stage
