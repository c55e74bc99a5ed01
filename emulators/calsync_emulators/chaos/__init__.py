"""A chaos run users can run themselves: ``python -m calsync_emulators.chaos`` (README, "Chaos run").

It drives load through calsync onto emulated calendars while it injects provider faults, SIGKILLs real
``calsync worker`` processes, fails a Redis master over and restarts the database; then it checks that no change
was lost, no effect duplicated, no version regressed, every dead letter is complete and a replay converges
(``invariants``), prints a report, and exits 0 only when all hold. Layers, top down: ``__main__`` (options) →
``run`` (the timeline) → ``fleet``, ``load``, ``outages``, ``backends`` → ``invariants`` (pure).
"""
