"""A local SparkSession set up the way cep's tests, benchmarks and examples need it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any

from cep.errors import CEPError

MIN_JAVA = 17


def java_version() -> int:
    """The major version of the ``java`` Spark will start; a CEPError saying what to do if
    there is none.

    >>> java_version() >= MIN_JAVA
    True
    """
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise CEPError(
            f"Spark needs Java {MIN_JAVA} or newer and no `java` was found "
            f"(JAVA_HOME={home!r}, PATH has none): install a JDK, e.g. "
            "`apt-get install openjdk-17-jre-headless`, or set JAVA_HOME"
        )
    try:
        text = subprocess.run([java, "-version"], capture_output=True, text=True,
                              timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CEPError(f"could not run {java} -version: {err}") from err
    found = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not found:
        raise CEPError(f"could not read the Java version from {java} -version: {text!r}")
    major = int(found.group(1))
    if major == 1 and found.group(2):  # 1.8 style
        major = int(found.group(2))
    if major < MIN_JAVA:
        raise CEPError(f"Spark needs Java {MIN_JAVA} or newer; {java} is Java {major}")
    return major


def local_session(cores: int = 2, shuffle_partitions: int = 4, app: str = "cep") -> Any:
    """``local[cores]`` Spark: UTC session time zone, no UI, few shuffle partitions, workers on
    this Python (so they see the same packages).

    Like ``getOrCreate``, it returns the session that is already running, if one is.

    >>> spark = local_session()
    >>> spark.conf.get("spark.sql.session.timeZone")
    'UTC'
    """
    java_version()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", shuffle_partitions)
        .config("spark.default.parallelism", cores)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


if __name__ == "__main__":
    try:
        print(f"Java {java_version()} found")
    except CEPError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
