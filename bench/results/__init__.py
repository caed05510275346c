"""Stored results and what is computed from them: one request's record
(:mod:`~bench.results.record`), the run directory (:mod:`~bench.results.store`), the statistics
(:mod:`~bench.results.stats`) and the SLO gate (:mod:`~bench.results.gate`)."""
