"""The event-time runtime: sources, watermarks, the keyed CEP operator, checkpoints, sinks.

>>> from cep.runtime import Job, FileSource, FileSink, WatermarkStrategy
"""

from cep.runtime.checkpoint import (
    CheckpointError,
    CheckpointStore,
    CheckpointWarning,
    ForeignCheckpointError,
)
from cep.runtime.job import FieldWarning, Job, Summary
from cep.runtime.live_rules import (
    RuleDirectory,
    RuleFeed,
    RuleSchedule,
    RuleSource,
    RuleWarning,
)
from cep.runtime.operator import CepOperator, DeadLetter, LateEvent

# imported here, the name is the function for good: a later `import cep.runtime.replay`
# would otherwise rebind the package attribute to the module
from cep.runtime.replay import replay
from cep.runtime.sinks import CallbackSink, FileSink, ListSink, Sink
from cep.runtime.sources import (
    DirectorySource,
    FileSource,
    IterableSource,
    SortedFileSource,
    Source,
)
from cep.runtime.watermarks import WatermarkStrategy

__all__ = [
    "CallbackSink",
    "CepOperator",
    "CheckpointError",
    "CheckpointStore",
    "CheckpointWarning",
    "DeadLetter",
    "DirectorySource",
    "FieldWarning",
    "FileSink",
    "FileSource",
    "ForeignCheckpointError",
    "IterableSource",
    "Job",
    "LateEvent",
    "ListSink",
    "RuleDirectory",
    "RuleFeed",
    "RuleSchedule",
    "RuleSource",
    "RuleWarning",
    "Sink",
    "SortedFileSource",
    "Source",
    "Summary",
    "WatermarkStrategy",
    "replay",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # the Spark functions import pyspark: only when asked for
    if name in ("match_stream", "match_batch", "SparkMetrics"):
        import cep.runtime.spark as spark

        return getattr(spark, name)
    raise AttributeError(f"module 'cep.runtime' has no attribute {name!r}")
