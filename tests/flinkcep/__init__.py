"""cep against the real FlinkCEP: random patterns and streams run on Flink's own CEP library
(``Harness.java``, a local Flink job) and on both of cep's engines, their matches and
timed-out partial matches compared.  ``make test-flinkcep`` (part of ``make test-slow``)
installs Flink in a virtualenv of its own (``benchmarks/.flink-venv``, as ``make
bench-flink`` does) and runs ``python -m tests.flinkcep.run``.

- :mod:`tests.flinkcep.cases` draws the cases: 2-4 stages with conditions on an integer
  ``v``, every contiguity (next, followed_by, followed_by_any, not_next,
  not_followed_by), quantifier and modifier (times, times(n, m), one_or_more,
  times_or_more, optional, greedy, consecutive, allow_combinations, until), ``within``
  of both kinds and the five skip strategies, over three keys of 3-12 events each; mixed
  in with modest probability (from a random stream of their own, so a case without them
  is the case the first version drew): group patterns (``Pattern.begin(group)``,
  ``.next(group)``, ... quantified and modified like a stage), conditions reading the
  partial match (``first``, ``last``, ``min``, ``max``, ``sum``, ``count`` of a stage,
  ``prev``: Flink's ``IterativeCondition`` over ``ctx.getEventsForPattern``, where an
  empty iterator gives cep's null, and a comparison with null is false) and loop
  windows (``times(n, Duration)``, ``oneOrMore(Duration)``, ``timesOrMore(n,
  Duration)``: cep's ``window=``).
- :mod:`tests.flinkcep.compare` builds each pattern with cep's builder from the same
  description and compares cep's output with Flink's, as multisets.
- One difference is Flink's, and is reported apart, not failed: with a
  ``PREVIOUS_AND_CURRENT`` window Flink 2.x sets no event-time timer for the window, so a
  timed-out partial match, or a match ending in ``not_followed_by``, is lost unless
  another event of its key comes (cep fires them when the watermark passes the window,
  as Flink's documentation says it should; see docs/porting.md).  The same holds for a
  loop window (``times(n, Duration)`` ...): Flink registers a timer for the
  FIRST_AND_LAST window only, so a timeout a loop window makes after the last event of
  its key is lost there.
"""
