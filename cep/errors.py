"""The errors a user of cep can meet; all derive from :class:`CEPError`."""

from __future__ import annotations


class CEPError(Exception):
    """Base class of every error raised by cep.

    >>> from cep import Pattern
    >>> try:
    ...     Pattern.begin("a").greedy()
    ... except CEPError as err:
    ...     print(type(err).__name__)
    MalformedPatternError
    """


class MalformedPatternError(CEPError, ValueError):
    """A pattern breaks one of FlinkCEP's rules (FlinkCEP's MalformedPatternException).

    The message names the stage and the rule, e.g.
    ``stage 'b': greedy() is not applicable to a single (non-quantified) stage``.
    """


class SkipStrategyError(CEPError):
    """An after-match skip strategy with ``throw_exception_on_miss()`` could not skip."""


class ConditionError(CEPError):
    """A user condition raised; the message names the stage and the offending event."""


class MeasureError(CEPError):
    """A measure could not be computed over a match (arithmetic on text, say); the message
    names the measure.  :func:`cep.match` raises it; a job writes the match with that
    measure null and warns once per rule and measure
    (:class:`cep.measures.MeasureWarning`): a match is never lost to its measure."""


class InputError(CEPError, ValueError):
    """Bad input to :func:`cep.match`: missing field, null or unparsable timestamp, bad file."""


class TimeUnitError(InputError):
    """Integer times whose unit is ambiguous: they look like epoch seconds (or micro- or
    nanoseconds) but would be read as milliseconds.  Give the unit (``time_unit="s"``,
    ``Job.timestamps(field, unit="s")``, ``--time-unit s``); see :mod:`cep.times`."""


class MissingFieldError(InputError):
    """An event lacks the key or time field the job reads.  A job whose input lacks it
    from the start fails with this error (the field name is likely wrong) instead of
    dead-lettering every event."""


class VisualizationError(CEPError):
    """A picture could not be made: matplotlib is missing (``pip install 'cep[viz]'``),
    Graphviz failed, or the output format is not one cep can write.

    >>> from cep.runtime.plot import new_figure, save_figure
    >>> save_figure(new_figure(2, 1), "alert.jpg")
    Traceback (most recent call last):
    ...
    cep.errors.VisualizationError: alert.jpg: cannot tell the image format from the suffix (use .png, .svg, .pdf)
    """


class TooManyPartialMatches(CEPError):
    """A key holds more partial matches than the job allows (``limit_partial_matches``,
    ``max_partial_matches``); the message names the key, the stages holding them and what
    to change."""


class CheckpointError(CEPError):
    """A checkpoint (or a Spark group's state) is missing, corrupt, truncated, from another
    version or another job, or does not fit the pattern it is restored into."""


class ForeignCheckpointError(CheckpointError):
    """A whole checkpoint written by another job or another cep version: older checkpoints in
    the directory are no better, so none is used."""
