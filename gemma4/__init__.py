"""The `gemma4` command line: one entry point for everything a user runs (see `gemma4.cli`),
and the offline preview of a stack (`gemma4.preview`)."""
