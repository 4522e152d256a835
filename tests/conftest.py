"""Fixtures shared across test modules: one local Spark for the whole session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A real ``local[2]`` SparkSession (4 shuffle partitions, UTC), started once."""
    import os

    from runtime.spark.session import local_session

    # pyspark's own worker code warns about pandas concatenation; keep test output readable
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")

    session = local_session(cores=2, shuffle_partitions=4, app="cep-tests")
    yield session
    session.stop()
