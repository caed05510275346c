"""engine-check: the real vLLM engine, on a CPU, against what this package renders and measures.

Small pure modules used by ``scripts/engine-check`` (see docs/engine-check.md): the one argv
transform that makes a stack's rendered ``vllm serve`` line runnable on a CPU
(:mod:`enginecheck.transform`), the comparisons of the benchmark's figures with the server's
own (:mod:`enginecheck.agreement`), of metric names and labels (:mod:`enginecheck.metricnames`)
and of the fakes' wire format with the real server's (:mod:`enginecheck.wire`); where a run
ran (:mod:`enginecheck.machine`) and whose a failed engine start is, the machine's or the
command line's
(:mod:`enginecheck.failures`). The tiny checkpoints are made by
:mod:`enginecheck.checkpoints`, run inside the engine's own environment (torch, transformers).
"""
