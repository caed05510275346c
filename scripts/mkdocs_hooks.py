"""MkDocs hooks: the shell blocks' test markers (```` ```bash cloud ````) are dropped before a
page is converted (Python-Markdown does not accept a second word after the language, and the
rest of the page would pair up the wrong fences), and the figures are drawn into the site."""

from __future__ import annotations

import atexit
import re
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

#: The figures drawn for one project and state of its sources (``mkdocs serve`` rebuilds on
#: every edit).
_drawn: dict[tuple[Path, float], Path] = {}

#: A fence opening with one of the test markers (the markers tests/test_readme.py defines).
MARKED_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,})bash[ \t]+(?:ci|cloud|heavy|serve)"
    r"[ \t]*$",
    re.MULTILINE,
)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page's Markdown with each marked fence opened as a plain ``bash`` fence."""
    return MARKED_FENCE.sub(r"\g<indent>\g<fence>bash", markdown)


def project_root(config: MkDocsConfig) -> Path:
    """The project the site documents: the folder of its config file, wherever the build runs
    from (`mkdocs build -f <repo>/mkdocs.yml`), never the current directory."""
    return Path(config.config_file_path).resolve().parent


def _sources_changed_at(root: Path) -> float:
    """The newest modification time among what the figures are drawn from."""
    packages = ("serving", "components", "gemma4", "bench", "policies", "endpoint")
    patterns = ["*.py", "Pulumi.*.yaml", ".github/workflows/*.yml", "scripts/figures/data/**/*"]
    patterns += [f"{package}/**/*.py" for package in packages]
    return max((p.stat().st_mtime for pattern in patterns for p in root.glob(pattern)), default=0.0)


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    """Draw every figure (once per state of the sources) and add it to the site."""
    root = project_root(config)
    if str(root) not in sys.path:  # MkDocs loads this file by path, and restores sys.path
        sys.path.insert(0, str(root))
    from scripts.figures import write_all
    from scripts.figures.draw import DotError

    stamp = (root, _sources_changed_at(root))
    if stamp not in _drawn:
        # A new folder of this process's own: the figures of this build, never those of an
        # earlier one, and never emptied under a build running beside it (another checkout,
        # a test building the site); the previous one is removed, the last one at exit.
        for old in _drawn.values():
            shutil.rmtree(old, ignore_errors=True)
        out = Path(tempfile.mkdtemp(prefix="gemma4-docs-figures-"))
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        with warnings.catch_warnings():
            # pulumi-gcp warns about its own deprecated modules when the program imports it.
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                write_all(out, root)
            except DotError as exc:  # one line (MkDocs prints a PluginError's message alone)
                raise PluginError(str(exc)) from None
        _drawn.clear()
        _drawn[stamp] = out
    for path in sorted(_drawn[stamp].iterdir()):
        files.append(File.generated(config, f"figures/{path.name}", abs_src_path=str(path)))
    return files
