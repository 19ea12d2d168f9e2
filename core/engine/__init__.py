"""How a run executes: :func:`~capmetrics.engine.scoring.score` and streaming, executors and
fan-out (:mod:`.parallel`), data prepared once per run, slow first steps started early
(:mod:`.prestart`), progress and notices, the run's configuration (:mod:`.config`) and what it
returns (:mod:`.results`, with its writers)."""
