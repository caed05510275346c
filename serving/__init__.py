"""Pulumi-free domain modules: hardware and model catalogs, typed settings, the vLLM renderer.

Everything here is plain Python so that the Pulumi components, the policy pack, the health
checks and the benchmark share one source of truth without importing Pulumi.
"""
