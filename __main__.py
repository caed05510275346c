"""Pulumi program: read the stack's settings, declare its components, export the outputs."""

import pulumi

from components.stack import build, read_settings

settings = read_settings()
for key, value in build(settings, prefix=f"gemma-{pulumi.get_stack()}").items():
    pulumi.export(key, value)
