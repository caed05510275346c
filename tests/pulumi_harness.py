"""The mock harness lives in the package (`preview.harness`, used by `gemma4 preview`); the
tests import it from here."""

from preview.harness import (
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
