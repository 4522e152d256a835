"""Fixtures shared across test modules: one local Spark for the whole session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

# `make test` (CI) is deterministic: every property draws the same examples on every run.
# `make test-slow` loads "random" for fresh examples; a counterexample it finds becomes an
# explicit @example or spec test.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("random", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("CEP_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A real ``local[2]`` SparkSession (4 shuffle partitions, UTC), started once."""
    from cep.runtime.spark.session import local_session

    # pyspark's own worker code warns about pandas concatenation; keep test output readable
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")

    session = local_session(cores=2, shuffle_partitions=4, app="cep-tests")
    yield session
    session.stop()
