"""Unit-test patterns the way Flink users test operators: feed elements and watermarks.

>>> from cep import Pattern
>>> h = OperatorHarness(Pattern.begin("a").where(lambda e: e == "x").next("b"))
>>> h.process_element("x", 1); h.process_element("y", 2); h.process_watermark(5)
>>> [dict(m) for m in h.matches]
[{'a': ['x'], 'b': ['y']}]
"""

from __future__ import annotations

from typing import Any

from cep.matches import Match, Timeout
from cep.pattern import Pattern
from cep.runtime.operator import CepOperator, DeadLetter, Extractor, LateEvent, Output


class OperatorHarness:
    """A :class:`CepOperator` whose outputs collect in ``matches``, ``timeouts``, ``late``
    and ``dead_letters``; one key unless ``key`` is given."""

    def __init__(
        self,
        pattern: Pattern,
        engine: str = "auto",
        *,
        key: Extractor = None,
        processing_time: bool = False,
        **options: Any,
    ) -> None:
        self.operator = CepOperator(
            pattern, engine, key=key, processing_time=processing_time, **options
        )
        self.matches: list[Match] = []
        self.timeouts: list[Timeout] = []
        self.late: list[LateEvent] = []
        self.dead_letters: list[DeadLetter] = []

    def process_element(self, event: Any, timestamp: int | None = None) -> None:
        """Feed one event with its ``timestamp`` (or the one its time field gives); it waits
        for a watermark past it before it is matched (Flink's ``processElement``).

        >>> from cep import Pattern
        >>> h = OperatorHarness(Pattern.begin("a").next("b"))
        >>> h.process_element("x", 1); h.process_element("y", 2)
        >>> h.matches, h.operator.buffered
        ([], 2)
        """
        self._collect(self.operator.process_element(event, timestamp))

    def process_watermark(self, timestamp: int) -> None:
        """Move the watermark to ``timestamp``: waiting events up to it are matched, windows
        that end by then time out, and later events at or below it are late.

        >>> from cep import Pattern
        >>> h = OperatorHarness(Pattern.begin("a").next("b"))
        >>> h.process_element("x", 1); h.process_element("y", 2); h.process_watermark(1)
        >>> h.matches
        []
        >>> h.process_watermark(2); [dict(m) for m in h.matches]
        [{'a': ['x'], 'b': ['y']}]
        >>> h.process_element("z", 2); [e.event for e in h.late]
        ['z']
        """
        self._collect(self.operator.process_watermark(timestamp))

    def finish(self) -> None:
        """End of input: the watermark moves to the end of time."""
        self._collect(self.operator.finish())

    processElement = process_element
    processWatermark = process_watermark

    @property
    def engine(self) -> str:
        """The engine the operator chose: ``"numba"`` or ``"reference"``.

        >>> from cep import Pattern
        >>> OperatorHarness(Pattern.begin("a").where(lambda e: True)).engine
        'reference'
        """
        return self.operator.engine.name

    def _collect(self, out: Output) -> None:
        self.matches += out.matches
        self.timeouts += out.timeouts
        self.late += out.late
        self.dead_letters += out.dead
