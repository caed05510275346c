"""The offline preview of a stack: the Pulumi program under Pulumi's mocks (`harness.py`) and
what `gemma4 preview` judges of it (`build.py`: resources, the `vllm serve` command line, the
policy verdicts, the capacity plan and the cost). No Pulumi CLI, no engine, no cloud; no
command line either: `gemma4/preview.py` prints it."""
