"""Pattern -> NFA, with FlinkCEP's construction so that matching follows its semantics.

The pattern is walked from its last stage to its first; each stage becomes one
or more states wired to the state built for what follows it ("the sink").
Negations become stop states and pending states, quantifiers become chains of
singleton states ending in a looping state, group patterns are compiled
recursively between their neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

from cep.conditions import TRUE, And, Condition, Not, condition_nodes
from cep.errors import MalformedPatternError
from cep.expr import Aggregate, Expr, StageRef
from cep.nfa.model import END_STATE, NAME_DELIMITER, NFA, Action, State, StateKind, stage_of
from cep.pattern import GROUP_NAME, Consuming, Kind, Pattern, Stage, WithinType


@dataclass(eq=False)
class _Node:
    """A stage in FlinkCEP's linked form: each stage knows the one before it."""

    stage: Stage
    previous: _Node | None
    group_last: _Node | None

    @property
    def name(self) -> str:
        return self.stage.name


def _link(pattern: Pattern) -> _Node:
    node: _Node | None = None
    for stage in pattern.stages:
        inner = _link(stage.group) if stage.group is not None else None
        node = _Node(stage, node, inner)
    assert node is not None
    return node


def compile_pattern(pattern: Pattern) -> NFA:
    """Compile ``pattern``; raise :class:`MalformedPatternError` for patterns FlinkCEP rejects."""
    if not isinstance(pattern, Pattern):
        raise MalformedPatternError(f"expected a Pattern, got {type(pattern).__name__}")
    _check_stage_references(pattern)
    return _Compiler(pattern).compile()


def _check_stage_references(pattern: Pattern) -> None:
    """Refuse an expression that reads a stage the pattern does not have (a misspelt name:
    it would read nothing, count 0, in every partial match).  Any stage of the pattern
    may be read, one after the condition's too (FlinkCEP's getEventsForPattern)."""
    names = pattern.stage_names()
    for stage in pattern.iter_stages():
        for cond in (stage.condition, stage.until):
            exprs = () if cond is None else (
                c for c in condition_nodes(cond) if isinstance(c, Expr))
            for node in (n for e in exprs for n in e.walk()):
                ref = node.stage if isinstance(node, (StageRef, Aggregate)) else None
                if ref is not None and ref not in names:
                    raise MalformedPatternError(
                        f"stage {stage.name!r}: {node!r} refers to stage {ref!r}, which the "
                        f"pattern does not have (its stages: {names})")


class _Compiler:
    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.used_names: set[str] = set()
        self.stop_states: dict[str, State] = {}
        self.states: list[State] = []
        self.windows: dict[str, int] = {}
        self.window: int | None = None
        self.group: _Node | None = None
        self.first_of_loop: dict[int, bool] = {}
        self.current: _Node = _link(pattern)
        self.following: _Node | None = None
        self.original_state: dict[str, State] = {}

    # ------------------------------------------------------------- top level
    def compile(self) -> NFA:
        last = self.current
        self._check_names()
        self._check_skip_stage()
        sink = self._create_ending_state()
        sink = self._create_middle_states(sink)
        start = self._convert(sink)
        start.kind = StateKind.START
        self._check_windows()
        if (
            last.stage.consuming is Consuming.NOT_FOLLOW
            and self.windows.get(last.name, 0) <= 0
            and (self.window or 0) == 0
        ):
            raise MalformedPatternError(
                f"stage {last.name!r}: not_followed_by() as the last stage needs a time window: "
                "add .within(...) (the match completes when the window passes without the event)"
            )
        self._check_rounds_take_events(start)
        return NFA(
            states={s.name: s for s in self.states},
            start=start,
            window=self.window or 0,
            windows=dict(self.windows),
            skip=self.pattern.skip,
            stage_names=tuple(self.pattern.stage_names()),
        )

    def _check_rounds_take_events(self, start: State) -> None:
        """Refuse a group that repeats without end although a round can take no event
        (``begin(begin("a").optional()).one_or_more()``): its PROCEED edges form a loop,
        which would run forever on the first event (FlinkCEP's NFA, as far as its
        ``computeNextStates`` reads, has no guard either).  A regular expression engine
        would stop the empty round, which an NFA of FlinkCEP's kind has no place for, so it
        is an error that names the stages."""
        on_path: list[State] = []
        done: set[int] = set()

        def loop_from(state: State) -> list[State] | None:
            on_path.append(state)
            for t in state.transitions:
                if t.action is not Action.PROCEED or id(t.target) in done:
                    continue
                if any(t.target is s for s in on_path):
                    return on_path[next(i for i, s in enumerate(on_path) if s is t.target):]
                found = loop_from(t.target)
                if found is not None:
                    return found
            on_path.pop()
            done.add(id(state))
            return None

        for state in [start, *self.states]:
            if id(state) in done:
                continue
            loop = loop_from(state)
            if loop is not None:
                stages = sorted({s.stage for s in loop if s.stage != GROUP_NAME})
                raise MalformedPatternError(
                    f"stages {', '.join(map(repr, stages))} repeat in a group that can take "
                    "no event in a round (each of them is optional or may repeat zero "
                    "times), so the group would repeat without end: make one of them "
                    "required"
                )

    def _check_names(self) -> None:
        seen: set[str] = {END_STATE}
        for stage in self.pattern.iter_stages():
            if stage.name in seen:
                raise MalformedPatternError(
                    f"duplicate stage name {stage.name!r}: stage names must be unique"
                    + (" ($endState$ is reserved)" if stage.name == END_STATE else "")
                )
            seen.add(stage.name)

    def _check_skip_stage(self) -> None:
        wanted = self.pattern.skip.stage
        if wanted is not None and wanted not in [s.name for s in self.pattern.stages]:
            raise MalformedPatternError(
                f"the skip strategy {self.pattern.skip!r} names stage {wanted!r}, which is not "
                "a top-level stage of the pattern (stages: "
                f"{[s.name for s in self.pattern.stages]})"
            )

    def _check_windows(self) -> None:
        if self.window is not None and any(w > self.window for w in self.windows.values()):
            raise MalformedPatternError(
                "a PREVIOUS_AND_CURRENT (or loop) window cannot be longer than the pattern's "
                f"FIRST_AND_LAST window ({self.window} ms)"
            )

    # ---------------------------------------------------------- state making
    def _new_state(self, name: str, kind: StateKind) -> State:
        candidate, counter = name, 0
        while candidate in self.used_names:
            candidate = f"{name}{NAME_DELIMITER}{counter}"
            counter += 1
        self.used_names.add(candidate)
        state = State(candidate, kind)
        self.states.append(state)
        return state

    def _take_state(self, kind: StateKind) -> State:
        """A state of the current stage that takes events: it carries the stage's gap window."""
        state = self._new_state(self.current.name, kind)
        stage = self.current.stage
        gap = stage.window(WithinType.PREVIOUS_AND_CURRENT)
        if stage.times is None and gap is not None:
            self.windows[state.name] = gap
        elif (
            stage.times is not None
            and stage.times.window is not None
            and NAME_DELIMITER in state.name
        ):
            self.windows[state.name] = stage.times.window
        return state

    def _stop_state(self, condition: Condition, name: str) -> State:
        stop = self.stop_states.get(name)
        if stop is None:
            stop = self._new_state(name, StateKind.STOP)
            stop.add_take(stop, condition)
            self.stop_states[name] = stop
        return stop

    def _copy(self, state: State) -> State:
        copy = self._new_state(stage_of(state.name), state.kind)
        for t in state.transitions:
            copy.add(t.action, copy if t.target is t.source else t.target, t.condition)
        return copy

    # ------------------------------------------------------------ the walk
    def _create_ending_state(self) -> State:
        end = self._new_state(END_STATE, StateKind.FINAL)
        self.window = self.current.stage.window(WithinType.FIRST_AND_LAST)
        return end

    def _create_middle_states(self, sink: State) -> State:
        last_sink = sink
        while self.current.previous is not None:
            stage = self.current.stage
            if stage.consuming is Consuming.NOT_FOLLOW:
                has_window = (
                    stage.window(WithinType.PREVIOUS_AND_CURRENT) is not None
                    or (self.window or 0) > 0
                )
                if has_window and last_sink.is_final:
                    pending = self._take_state(StateKind.PENDING)
                    not_cond = self._take_condition(self.current)
                    stop = self._stop_state(not_cond, self.current.name)
                    pending.add_proceed(stop, not_cond)
                    pending.add_ignore(pending, Not(not_cond))
                    last_sink = pending
            elif stage.consuming is Consuming.NOT_NEXT:
                not_next = self._take_state(StateKind.NORMAL)
                not_cond = self._take_condition(self.current)
                stop = self._stop_state(not_cond, self.current.name)
                if last_sink.is_final:
                    # an IGNORE, so that reaching the final state needs one more event
                    not_next.add_ignore(last_sink, Not(not_cond))
                else:
                    not_next.add_proceed(last_sink, Not(not_cond))
                not_next.add_proceed(stop, not_cond)
                last_sink = not_next
            else:
                last_sink = self._convert(last_sink)
            self.following = self.current
            self.current = self.current.previous
            window = self.current.stage.window(WithinType.FIRST_AND_LAST)
            if window is not None and window < (self.window if self.window is not None else 2**63):
                self.window = window
        return last_sink

    def _convert(self, sink: State) -> State:
        stage = self.current.stage
        if stage.kind is Kind.LOOPING:
            self._set_first_of_loop(False)
            looping = self._create_looping(self._copy_without_transitive_nots(sink))
            self._set_first_of_loop(True)
            assert stage.times is not None
            last = self._create_times(looping, sink, stage.times.low, stage.times.low)
        elif stage.kind is Kind.TIMES:
            assert stage.times is not None and stage.times.high is not None
            last = self._create_times(sink, sink, stage.times.low, stage.times.high)
        else:
            last = self._create_singleton(
                sink,
                sink,
                self._take_condition(self.current),
                self._ignore_condition(self.current),
                stage.optional,
            )
        self._add_stop_states(last)
        return last

    def _create_times(self, sink: State, proceed: State | None, low: int, high: int) -> State:
        last = sink
        stage = self.current.stage
        self._set_first_of_loop(False)
        until = stage.until
        inner_ignore = _with_until(self._inner_ignore_condition(self.current), until, False)
        take = _with_until(self._take_condition(self.current), until, True)
        if stage.greedy and low != high:
            if until is not None:
                self.original_state[sink.name] = self._copy(sink)
            _make_greedy(sink, take)
        for _ in range(low, high):
            last = self._create_singleton(last, proceed, take, inner_ignore, True)
            self._add_stop_state_to_looping(last)
        for _ in range(low - 1):
            last = self._create_singleton(last, None, take, inner_ignore, False)
            self._add_stop_state_to_looping(last)
        self._set_first_of_loop(True)
        return self._create_singleton(
            last, proceed, take, self._ignore_condition(self.current), stage.optional
        )

    def _create_singleton(
        self,
        sink: State,
        proceed: State | None,
        take: Condition | None,
        ignore: Condition | None,
        optional: bool,
    ) -> State:
        if self.current.stage.is_group:
            return self._create_group(self.current, sink, proceed, optional)
        stage = self.current.stage
        single = self._take_state(StateKind.NORMAL)
        # taking an event here ends the NOTs that preceded this optional stage
        target = self._copy_without_transitive_nots(sink)
        single.add_take(target, take)
        proceed_cond = self._true_condition()
        if optional:
            assert proceed is not None
            if stage.greedy:
                until = stage.until
                if until is not None:
                    # the state proceeded to before its NOTs were copied away; the end
                    # state has no such original (FlinkCEP's compiler looks it up all the
                    # same and its NFA fails at run time with a NullPointerException)
                    single.add_proceed(
                        self.original_state.get(proceed.name, proceed), And(proceed_cond, until)
                    )
                single.add_proceed(
                    proceed, And(proceed_cond, Not(until)) if until is not None else proceed_cond
                )
            else:
                single.add_proceed(proceed, proceed_cond)
        if ignore is not None:
            if optional or self._is_head_of_optional_group(self.current):
                ignore_state = self._new_state(self.current.name, StateKind.NORMAL)
                ignore_state.add_take(target, take)
                ignore_state.add_ignore(ignore_state, ignore)
                self._add_stop_states(ignore_state)
            else:
                ignore_state = single
            single.add_ignore(ignore_state, ignore)
        return single

    def _create_group(
        self, group: _Node, sink: State, proceed: State | None, optional: bool
    ) -> State:
        proceed_cond = self._true_condition()
        saved = (self.current, self.following, self.group)
        self.group = group
        assert group.group_last is not None
        self.current = group.group_last
        last = self._create_middle_states(sink)
        last = self._convert(last)
        if optional:
            assert proceed is not None
            # the group's first state may skip the whole group
            last.add_proceed(proceed, proceed_cond)
        self.current, self.following, self.group = saved
        return last

    def _create_looping_group(self, group: _Node, sink: State) -> State:
        proceed_cond = self._true_condition()
        saved = (self.current, self.following, self.group)
        loop_back = self._take_state(StateKind.NORMAL)
        self.group = group
        assert group.group_last is not None
        self.current = group.group_last
        last = self._create_middle_states(loop_back)
        last = self._convert(last)
        last.add_proceed(sink, proceed_cond)
        loop_back.add_proceed(last, proceed_cond)
        self.current, self.following, self.group = saved
        return last

    def _create_looping(self, sink: State) -> State:
        if self.current.stage.is_group:
            return self._create_looping_group(self.current, sink)
        stage = self.current.stage
        until = stage.until
        ignore = _with_until(self._inner_ignore_condition(self.current), until, False)
        take = _with_until(self._take_condition(self.current), until, True)
        proceed_cond = self._true_condition()
        looping = self._take_state(StateKind.NORMAL)
        if stage.greedy:
            if until is not None:
                copy = self._copy(sink)
                looping.add_proceed(copy, And(proceed_cond, until))
                self.original_state[sink.name] = copy
            looping.add_proceed(
                sink, And(proceed_cond, Not(until)) if until is not None else proceed_cond
            )
            _make_greedy(sink, self._take_condition(self.current))
        else:
            looping.add_proceed(sink, proceed_cond)
        looping.add_take(looping, take)
        self._add_stop_state_to_looping(looping)
        if ignore is not None:
            ignore_state = self._new_state(self.current.name, StateKind.NORMAL)
            ignore_state.add_take(looping, take)
            ignore_state.add_ignore(ignore_state, ignore)
            looping.add_ignore(ignore_state, ignore)
            self._add_stop_state_to_looping(ignore_state)
        return looping

    # ------------------------------------------------------------- negation
    def _current_not_conditions(self) -> list[tuple[Condition, str]]:
        """NOTs that still apply here: reached backwards through optional or NOT stages."""
        found: list[tuple[Condition, str]] = []
        node = self.current
        while node.previous is not None and (
            node.previous.stage.optional or node.previous.stage.consuming is Consuming.NOT_FOLLOW
        ):
            node = node.previous
            if node.stage.consuming is Consuming.NOT_FOLLOW:
                found.append((self._take_condition(node), node.name))
        return found

    def _copy_without_transitive_nots(self, sink: State) -> State:
        nots = self._current_not_conditions()
        if not nots or not self.current.stage.optional:
            return sink
        names = {name for _, name in nots}
        copy = self._new_state(sink.name, sink.kind)
        for t in sink.transitions:
            if t.action is Action.PROCEED:
                target = t.target
                if target.is_stop:
                    if target.name in names:
                        continue
                else:
                    target = self._copy_without_transitive_nots(target)
                copy.add(t.action, target, t.condition)
            else:
                copy.add(t.action, copy if t.target is t.source else t.target, t.condition)
        return copy

    def _add_stop_states(self, state: State) -> None:
        for condition, name in self._current_not_conditions():
            state.add_proceed(self._stop_state(condition, name), condition)

    def _add_stop_state_to_looping(self, state: State) -> None:
        following = self.following
        if following is not None and following.stage.consuming is Consuming.NOT_FOLLOW:
            condition = self._take_condition(following)
            state.add_proceed(self._stop_state(condition, following.name), condition)

    # ----------------------------------------------------------- conditions
    def _set_first_of_loop(self, value: bool) -> None:
        if self.current.stage.is_group:
            self.first_of_loop[id(self.current)] = value

    def _group_first_of_loop(self) -> bool:
        return self.first_of_loop.get(id(self.group), True)

    def _head_of_group(self, node: _Node) -> bool:
        return self.group is not None and node.previous is None

    def _is_head_of_optional_group(self, node: _Node) -> bool:
        return (
            self._head_of_group(node)
            and self._group_first_of_loop()
            and self.group is not None
            and self.group.stage.optional
        )

    def _group_until(self) -> Condition | None:
        return self.group.stage.until if self.group is not None else None

    def _ignore_for(self, node: _Node, strategy: Consuming) -> Condition | None:
        if strategy is Consuming.SKIP_TILL_NEXT:
            cond: Condition | None = Not(node.stage.take_condition)
        elif strategy is Consuming.SKIP_TILL_ANY:
            cond = TRUE
        else:
            cond = None
        return _with_until(cond, self._group_until(), False)

    def _inner_ignore_condition(self, node: _Node) -> Condition | None:
        strategy = node.stage.inner
        if self._head_of_group(node):
            assert self.group is not None
            strategy = self.group.stage.inner
        return self._ignore_for(node, strategy)

    def _ignore_condition(self, node: _Node) -> Condition | None:
        strategy = node.stage.consuming
        if self._head_of_group(node):
            assert self.group is not None
            group = self.group.stage
            strategy = group.consuming if self._group_first_of_loop() else group.inner
        return self._ignore_for(node, strategy)

    def _take_condition(self, node: _Node) -> Condition:
        cond = _with_until(node.stage.take_condition, self._group_until(), True)
        assert cond is not None
        return cond

    def _true_condition(self) -> Condition:
        cond = _with_until(TRUE, self._group_until(), True)
        assert cond is not None
        return cond


def _with_until(cond: Condition | None, until: Condition | None, is_take: bool) -> Condition | None:
    if until is not None and cond is not None:
        return And(Not(until), cond)
    if until is not None and is_take:
        return Not(until)
    return cond


def _make_greedy(state: State, take: Condition | None) -> None:
    """Greedy: the next stage may only move on when the loop cannot take the event."""
    assert take is not None
    for t in state.transitions:
        t.condition = And(t.condition, Not(take)) if t.condition is not None else Not(take)
