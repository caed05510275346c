"""The launch reader: reads back how a container launches vLLM (shell lexer, the `vllm serve`
argument reader, vLLM's option contract and defaults per release, the launch environment), as
the policies need it. It accepts only what it can follow exactly as the real tools would."""
