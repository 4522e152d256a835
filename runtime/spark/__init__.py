"""Spark scale-out: the same patterns and results on Structured Streaming and on history.

>>> from cep.runtime.spark import match_stream, match_batch, SparkMetrics

``match_stream`` runs a pattern over a streaming DataFrame with
``applyInPandasWithState`` (Spark's watermark, event-time timeouts, partial
matches in Spark's state store); ``match_batch`` over a static DataFrame with
``mapInArrow`` on partitions sorted by key and time.  Both need pyspark
(``pip install cep[spark]``) and Java 17.
"""

from cep.runtime.spark.batch import match_batch
from cep.runtime.spark.metrics import SparkMetrics
from cep.runtime.spark.stream import match_stream

__all__ = ["SparkMetrics", "match_batch", "match_stream"]
