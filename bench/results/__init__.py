"""Stored results and what is computed from them: the run directory
(:mod:`~bench.results.store`), the statistics (:mod:`~bench.results.stats`), the comparison of
runs with cost per million requests (:mod:`~bench.results.compare`) and the SLO gate
(:mod:`~bench.results.gate`)."""
