"""The client-fidelity harness: does the benchmark's client distort what it measures?

``python -m bench.fidelity`` (:mod:`bench.fidelity.harness`) drives the benchmark's own load
path, and plain clients for comparison, against :mod:`bench.fidelity.pacedserver`, a server
whose pacing is known, and reports what each client adds.
"""
