"""Sizing: vLLM's device-memory budget and KV cache for one instance (`memory`), from the
catalogues alone. It sits below the configuration, which holds every stack to it, and below
capacity, which builds its figures on it."""
