"""Entry point the Pulumi CLI runs: assemble the pack (this starts the policy server)."""

import sys
from pathlib import Path

# The CLI runs this file from the pack's folder; the policies import `serving` and `policies`
# from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import PolicyPack

from policies.registry import ALL, PACK_ENFORCEMENT_LEVEL, PACK_NAME

PolicyPack(name=PACK_NAME, policies=ALL, enforcement_level=PACK_ENFORCEMENT_LEVEL)
