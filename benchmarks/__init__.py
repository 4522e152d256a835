"""Reproducible benchmarks of the ``cep`` engines: ``python -m benchmarks.run``.

* :mod:`benchmarks.data` — deterministic Parquet generators (card transactions, IoT readings);
* :mod:`benchmarks.patterns` — the benchmark patterns A, B and C as expression conditions;
* :mod:`benchmarks.handwritten` — numba loops specialised to patterns A and B (the practical limit);
* :mod:`benchmarks.run` — runs every variant, each in its own subprocess, and writes RESULTS.md.
"""
