"""What the chaos run, the benchmarks and the tests share to run calsync against processes of their own.

``waiting`` (free ports, condition waits), ``scratch`` (a run's own Redis namespace and database schema,
removed afterwards), ``workers`` (``calsync worker`` commands in process groups of their own) and ``sentinel``
(a Redis master, replica and three sentinels as plain processes). Nothing here is a pytest fixture: the
tests wrap these in their own (tests/integration/sentinel_support.py).
"""
