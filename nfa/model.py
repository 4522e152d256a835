"""The compiled NFA: states joined by TAKE / IGNORE / PROCEED edges.

* TAKE consumes the event into the source state's stage and moves to the target;
* IGNORE skips the event and moves to the target (often the state itself);
* PROCEED is an epsilon move, taken before the event is considered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from cep.conditions import Condition
from cep.skip import SkipStrategy

#: Internal state names are ``stage``, ``stage:0``, ``stage:1``...; the stage is the part before.
NAME_DELIMITER = ":"
END_STATE = "$endState$"


class Action(Enum):
    TAKE = "TAKE"
    IGNORE = "IGNORE"
    PROCEED = "PROCEED"


class StateKind(Enum):
    START = "Start"
    NORMAL = "Normal"
    FINAL = "Final"
    STOP = "Stop"
    PENDING = "Pending"


def stage_of(state_name: str) -> str:
    """The user's stage name behind an internal state name (``b:1`` -> ``b``)."""
    return state_name.split(NAME_DELIMITER, 1)[0]


@dataclass(eq=False)
class Transition:
    action: Action
    source: State
    target: State
    condition: Condition | None


@dataclass(eq=False)
class State:
    name: str
    kind: StateKind
    transitions: list[Transition] = field(default_factory=list)

    @property
    def stage(self) -> str:
        return stage_of(self.name)

    @property
    def is_start(self) -> bool:
        return self.kind is StateKind.START

    @property
    def is_final(self) -> bool:
        return self.kind is StateKind.FINAL

    @property
    def is_stop(self) -> bool:
        return self.kind is StateKind.STOP

    @property
    def is_pending(self) -> bool:
        return self.kind is StateKind.PENDING

    def add(self, action: Action, target: State, condition: Condition | None) -> None:
        self.transitions.append(Transition(action, self, target, condition))

    def add_take(self, target: State, condition: Condition | None) -> None:
        self.add(Action.TAKE, target, condition)

    def add_ignore(self, target: State, condition: Condition | None) -> None:
        self.add(Action.IGNORE, target, condition)

    def add_proceed(self, target: State, condition: Condition | None) -> None:
        self.add(Action.PROCEED, target, condition)

    def __repr__(self) -> str:
        return f"State({self.name!r}, {self.kind.value})"


@dataclass(eq=False)
class NFA:
    """A compiled pattern: what every engine runs.

    ``window`` is the FIRST_AND_LAST window in ms (0 = none); ``windows`` maps
    internal state names to PREVIOUS_AND_CURRENT (or loop) windows.
    """

    states: dict[str, State]
    start: State
    window: int
    windows: dict[str, int]
    skip: SkipStrategy
    stage_names: tuple[str, ...]
