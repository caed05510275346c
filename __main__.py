"""Pulumi program: read the stack's settings, declare its components, export the outputs.

A refusal (bad stack config, a misspelled key or namespace, `gcp:project` missing) reaches the
user as one `pulumi.RunError` message: the language host prints a traceback for anything else.
"""

import pulumi

from components.stack import build, read_settings
from serving.config.checks import SettingsError

try:
    settings = read_settings()
except SettingsError as exc:
    raise pulumi.RunError(str(exc)) from None
for key, value in build(settings, prefix=f"gemma-{pulumi.get_stack()}").items():
    pulumi.export(key, value)
