"""The event-time runtime: sources, watermarks, the keyed CEP operator, checkpoints, sinks.

>>> from runtime import Job, FileSource, FileSink, WatermarkStrategy
"""

from runtime.checkpoint import (
    CheckpointError,
    CheckpointStore,
    CheckpointWarning,
    ForeignCheckpointError,
)
from runtime.job import Job, Summary
from runtime.operator import CepOperator, DeadLetter, LateEvent

# imported here, the name is the function for good: a later `import runtime.replay`
# would otherwise rebind the package attribute to the module
from runtime.replay import replay
from runtime.sinks import CallbackSink, FileSink, ListSink, Sink
from runtime.sources import (
    DirectorySource,
    FileSource,
    IterableSource,
    SortedFileSource,
    Source,
)
from runtime.watermarks import WatermarkStrategy

__all__ = [
    "CallbackSink",
    "CepOperator",
    "CheckpointError",
    "CheckpointStore",
    "CheckpointWarning",
    "DeadLetter",
    "DirectorySource",
    "FileSink",
    "FileSource",
    "ForeignCheckpointError",
    "IterableSource",
    "Job",
    "LateEvent",
    "ListSink",
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
        import runtime.spark as spark

        return getattr(spark, name)
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
