"""MkDocs hook: the shell blocks' test markers render as plain bash blocks.

The docs mark shell blocks for tests/test_readme.py with a second word (```` ```bash cloud ````,
``heavy``, ``serve``, ``ci``, ``script``, ``script-refused``). GitHub highlights by the first
word, but Python-Markdown's fenced-code extension does not accept a second bare word: the fence
is not recognised, and the rest of the page pairs up the wrong fences (headings end up inside
code). This hook drops the marker before the page is converted; the tests still read it from
the source.
"""

from __future__ import annotations

import re
from typing import Any

#: A fence opening with one of the test markers (the markers tests/test_readme.py defines).
MARKED_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,})bash[ \t]+(?:ci|cloud|heavy|serve|script|script-refused)"
    r"[ \t]*$",
    re.MULTILINE,
)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page's Markdown with each marked fence opened as a plain ``bash`` fence."""
    return MARKED_FENCE.sub(r"\g<indent>\g<fence>bash", markdown)
