"""The mock harness lives in the package (`gemma4.harness`, used by `gemma4 preview`); the
tests import it from here."""

from gemma4.harness import (
    PROJECT,
    ROOT,
    Declared,
    HookRecordingMonitor,
    RecordingMocks,
    Rendered,
    render,
    run_hook,
    set_config,
    stack_config,
)

__all__ = [
    "PROJECT",
    "ROOT",
    "Declared",
    "HookRecordingMonitor",
    "RecordingMocks",
    "Rendered",
    "render",
    "run_hook",
    "set_config",
    "stack_config",
]
