"""What a run or a comparison of runs shows: throughput and latency against concurrency
(:mod:`~bench.reports.charts`), latency distributions (:mod:`~bench.reports.latency_charts`),
and runs side by side with deltas and cost per million requests (:mod:`~bench.reports.compare`)."""
