"""Policy pack for `pulumi preview --policy-pack policies`, and the capacity planner.

`policies.registry.ALL` lists the policies (one per module); `policies/__main__.py` only
assembles the pack; `gemma4 plan -s <stack>` prints a stack's memory plan.
"""
