"""Catalogues: the accelerators (`hardware`), the checkpoints and their architecture
(`models`), and how a checkpoint is named and pinned (`checkpoints`). Facts with sources; they
import nothing else of the project."""
