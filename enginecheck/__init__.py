"""engine-check: the real vLLM engine, on a CPU, against what this package renders and measures
(docs/engine-check.md). Small pure modules used by ``scripts/engine-check``; :mod:`.cli` and
:mod:`.checkpoints` run inside the engine's own environment.
"""
