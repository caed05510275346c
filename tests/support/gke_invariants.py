"""The cross-object references of a GKE stack (`policies._wiring`, shared with the
`inference-pool-wiring` policy), for the contract tests."""

from policies._wiring import check, manifest_from_engine, node_pool_accelerator, selects

__all__ = ["check", "manifest_from_engine", "node_pool_accelerator", "selects"]
