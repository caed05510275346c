"""Charts of a run or a comparison: throughput and latency against concurrency
(:mod:`~bench.reports.charts`) and latency distributions (:mod:`~bench.reports.latency_charts`)."""
