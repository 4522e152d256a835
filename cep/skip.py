"""After-match skip strategies (FlinkCEP's ``AfterMatchSkipStrategy``).

They decide which partial matches are discarded once a match is emitted:

* ``no_skip()`` keeps every partial match;
* ``skip_to_next()`` discards partial matches that started with, or before,
  the match's first event;
* ``skip_past_last_event()`` discards partial matches that started at or
  before the match's last event;
* ``skip_to_first(name)`` / ``skip_to_last(name)`` discard partial matches that
  started before the first / last event the match took for stage ``name``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from cep.errors import SkipStrategyError

EventId = tuple[int, int]


class SkipKind(Enum):
    """Which of the five strategies a :class:`SkipStrategy` is.

    >>> SkipStrategy.skip_to_next().kind
    <SkipKind.SKIP_TO_NEXT: 'skip_to_next'>
    """

    NO_SKIP = "no_skip"
    SKIP_TO_NEXT = "skip_to_next"
    SKIP_PAST_LAST_EVENT = "skip_past_last_event"
    SKIP_TO_FIRST = "skip_to_first"
    SKIP_TO_LAST = "skip_to_last"


@dataclass(frozen=True)
class SkipStrategy:
    """An after-match skip strategy; build one with the static constructors.

    >>> SkipStrategy.skip_to_first("b").throw_exception_on_miss()
    SkipStrategy.skip_to_first('b').throw_exception_on_miss()
    """

    kind: SkipKind = SkipKind.NO_SKIP
    stage: str | None = None
    throw_on_miss: bool = False

    @staticmethod
    def no_skip() -> SkipStrategy:
        """Discard nothing: every partial match stays and every match is emitted,
        overlapping ones included (FlinkCEP's ``NO_SKIP``, the default).

        >>> from cep import Pattern, match
        >>> skip = SkipStrategy.no_skip()
        >>> p = (Pattern.begin("a", skip=skip).where(lambda e: e[0] == "a").one_or_more()
        ...      .followed_by("b").where(lambda e: e == "b"))
        >>> [" ".join(m.events()) for m in match(["a1", "a2", "a3", "b"], p)]
        ['a1 a2 a3 b', 'a1 a2 b', 'a1 b', 'a2 a3 b', 'a2 b', 'a3 b']
        """
        return SkipStrategy(SkipKind.NO_SKIP)

    @staticmethod
    def skip_to_next() -> SkipStrategy:
        """After a match, discard the partial matches that started with (or before) the
        match's first event, so each event starts at most one match (FlinkCEP's
        ``SKIP_TO_NEXT``).

        >>> from cep import Pattern, match
        >>> skip = SkipStrategy.skip_to_next()
        >>> p = (Pattern.begin("a", skip=skip).where(lambda e: e[0] == "a").one_or_more()
        ...      .followed_by("b").where(lambda e: e == "b"))
        >>> [" ".join(m.events()) for m in match(["a1", "a2", "a3", "b"], p)]
        ['a1 a2 a3 b', 'a2 a3 b', 'a3 b']
        """
        return SkipStrategy(SkipKind.SKIP_TO_NEXT)

    @staticmethod
    def skip_past_last_event() -> SkipStrategy:
        """After a match, discard the partial matches that started at or before the
        match's last event, so matches never share an event (FlinkCEP's
        ``SKIP_PAST_LAST_EVENT``).

        >>> from cep import Pattern, match
        >>> skip = SkipStrategy.skip_past_last_event()
        >>> p = (Pattern.begin("a", skip=skip).where(lambda e: e[0] == "a").one_or_more()
        ...      .followed_by("b").where(lambda e: e == "b"))
        >>> [" ".join(m.events()) for m in match(["a1", "a2", "a3", "b"], p)]
        ['a1 a2 a3 b']
        """
        return SkipStrategy(SkipKind.SKIP_PAST_LAST_EVENT)

    @staticmethod
    def skip_to_first(stage: str) -> SkipStrategy:
        """After a match, discard the partial matches that started before the first event
        the match took for ``stage`` (FlinkCEP's ``SKIP_TO_FIRST``); see
        :meth:`throw_exception_on_miss` for a match without that stage.

        >>> from cep import Pattern, match
        >>> skip = SkipStrategy.skip_to_first("a")
        >>> p = (Pattern.begin("a", skip=skip).where(lambda e: e[0] == "a").one_or_more()
        ...      .followed_by("b").where(lambda e: e == "b"))
        >>> [" ".join(m.events()) for m in match(["a1", "a2", "a3", "b"], p)]
        ['a1 a2 a3 b', 'a1 a2 b', 'a1 b']
        """
        return SkipStrategy(SkipKind.SKIP_TO_FIRST, _stage_name(stage))

    @staticmethod
    def skip_to_last(stage: str) -> SkipStrategy:
        """After a match, discard the partial matches that started before the last event
        the match took for ``stage`` (FlinkCEP's ``SKIP_TO_LAST``); see
        :meth:`throw_exception_on_miss` for a match without that stage.

        >>> from cep import Pattern, match
        >>> skip = SkipStrategy.skip_to_last("a")
        >>> p = (Pattern.begin("a", skip=skip).where(lambda e: e[0] == "a").one_or_more()
        ...      .followed_by("b").where(lambda e: e == "b"))
        >>> [" ".join(m.events()) for m in match(["a1", "a2", "a3", "b"], p)]
        ['a1 a2 a3 b', 'a3 b']
        """
        return SkipStrategy(SkipKind.SKIP_TO_LAST, _stage_name(stage))

    # FlinkCEP spellings
    noSkip = no_skip
    skipToNext = skip_to_next
    skipPastLastEvent = skip_past_last_event
    skipToFirst = skip_to_first
    skipToLast = skip_to_last

    def throw_exception_on_miss(self) -> SkipStrategy:
        """Raise :class:`SkipStrategyError` when the named stage is missing from a match
        (or is the match's first event, which would loop forever)."""
        if self.kind not in (SkipKind.SKIP_TO_FIRST, SkipKind.SKIP_TO_LAST):
            from cep.errors import MalformedPatternError

            raise MalformedPatternError(
                f"throw_exception_on_miss() applies to skip_to_first/skip_to_last, not {self!r}"
            )
        return replace(self, throw_on_miss=True)

    throwExceptionOnMiss = throw_exception_on_miss

    @property
    def is_skip(self) -> bool:
        """False only for ``no_skip``: matches then leave as soon as they complete."""
        return self.kind is not SkipKind.NO_SKIP

    def pruning_id(self, match: Mapping[str, Sequence[EventId]]) -> EventId | None:
        """The event id partial matches are pruned against, for one emitted match."""
        kind = self.kind
        if kind is SkipKind.NO_SKIP:
            return None
        if kind is SkipKind.SKIP_TO_NEXT:
            return min(ids[0] for ids in match.values())
        if kind is SkipKind.SKIP_PAST_LAST_EVENT:
            return max(ids[-1] for ids in match.values())
        ids = match.get(self.stage or "")
        pruning: EventId | None = None
        if not ids:
            if self.throw_on_miss:
                raise SkipStrategyError(
                    f"could not skip to {self.stage!r}: the match has no event for that stage "
                    f"(stages in the match: {list(match)})"
                )
        else:
            pruning = ids[0] if kind is SkipKind.SKIP_TO_FIRST else ids[-1]
        if self.throw_on_miss and pruning is not None:
            first = min(i for ids in match.values() for i in ids)
            if pruning == first:
                raise SkipStrategyError(
                    f"could not skip to {self.stage!r}: it is the first event of the match, "
                    "so skipping there would find the same match again"
                )
        return pruning

    def should_prune(self, start_id: EventId, pruning: EventId) -> bool:
        """Whether a partial match that started at event ``start_id`` is discarded, given
        the :meth:`pruning_id` of an emitted match.

        >>> SkipStrategy.skip_past_last_event().should_prune((0, 3), (0, 3))
        True
        >>> SkipStrategy.skip_to_last("b").should_prune((0, 3), (0, 3))
        False
        """
        if self.kind in (SkipKind.SKIP_TO_FIRST, SkipKind.SKIP_TO_LAST):
            return start_id < pruning
        return start_id <= pruning

    def __repr__(self) -> str:
        arg = "" if self.stage is None else repr(self.stage)
        text = f"SkipStrategy.{self.kind.value}({arg})"
        return text + (".throw_exception_on_miss()" if self.throw_on_miss else "")

    def to_dict(self) -> dict[str, Any]:
        """The strategy as plain data (as it appears in a pattern's JSON).

        >>> SkipStrategy.skip_to_first("b").to_dict()
        {'kind': 'skip_to_first', 'stage': 'b', 'throw_on_miss': False}
        """
        return {"kind": self.kind.value, "stage": self.stage, "throw_on_miss": self.throw_on_miss}


def _stage_name(stage: Any) -> str:
    from cep.errors import MalformedPatternError

    if not isinstance(stage, str) or not stage:
        raise MalformedPatternError(f"a skip strategy needs a stage name, got {stage!r}")
    return stage
