"""The documentation site: generated references match the code, every page is in the site's
navigation, and a newcomer finds the essentials from the front page and a short README."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from preview.harness import ROOT

DOCS = ROOT / "docs"


def gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_generated_references_match_the_code() -> None:
    gen = gen_docs()
    stale = [
        f"docs/reference/{name} is stale: run .venv/bin/python scripts/gen_docs.py"
        for name, render in gen.PAGES.items()
        if (DOCS / "reference" / name).read_text() != render()
    ]
    assert stale == []


def test_the_references_name_every_key_command_option_and_policy() -> None:
    """The generator covers the whole of each source, not a selection."""
    from gemma4 import cli
    from policies.registry import ALL
    from serving.config.settings import config_keys

    gen = gen_docs()
    config = gen.configuration_page()
    for key in config_keys():
        assert f"| `{key}` |" in config, key
    commands = gen.commands_page()
    for command in cli.COMMANDS:
        parser = cli.subcommand_parser(command)
        assert f"## `gemma4 {command.name}`" in commands
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}`" in commands, (command.name, option)
    policies = gen.policies_page()
    for policy in ALL:
        assert f"## {policy.name}" in policies
        for threshold in policy.config_schema.properties if policy.config_schema else {}:
            assert f"| `{threshold}` |" in policies, (policy.name, threshold)


def test_a_stale_page_is_named_with_the_command_that_fixes_it(tmp_path: Path) -> None:
    gen = gen_docs()
    gen.REFERENCE = tmp_path  # type: ignore[attr-defined]
    for name, render in gen.PAGES.items():
        (tmp_path / name).write_text(render())
    (tmp_path / "policies.md").write_text("edited by hand\n")
    assert gen.stale() == ["policies.md"]
    assert gen.main(["--check"]) == 1
    assert gen.write() == ["policies.md"] and gen.stale() == []


def nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in nav_pages(value)]
    return []


def mkdocs_config() -> dict[str, object]:
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml names a Python function for the mermaid fence (`!!python/name:`).
    Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda *_: None)
    data = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    assert isinstance(data, dict)
    return data


def test_every_page_is_in_the_navigation_and_every_entry_exists() -> None:
    nav = nav_pages(mkdocs_config()["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav))


def test_the_site_builds_offline_in_strict_mode_by_configuration() -> None:
    config = mkdocs_config()
    assert config["strict"] is True
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]  # type: ignore[attr-defined]
    assert plugins == ["search"]  # no social cards, no privacy plugin: nothing fetched
    assert config["theme"]["font"] is False  # type: ignore[index]
    assert (ROOT / ".gitignore").read_text().count("/site/") == 1


@pytest.mark.long
def test_the_site_builds_with_every_fence_rendered(tmp_path: Path) -> None:
    """`mkdocs build --strict` as scripts/check runs it (not --quiet: with it, MkDocs counts no
    warning, so strict mode never fails), and no page shows a fence as text: a fence
    Python-Markdown does not recognise (```` ```bash cloud ```` without the hook in
    scripts/mkdocs_hooks.py) pairs the page's other fences wrongly and swallows headings."""
    import subprocess

    # scripts/check names an empty folder and opens the site built there in a browser after
    # pytest: the site is built once per check.
    site = Path(os.environ.get("GEMMA4_SITE_DIR") or tmp_path / "site")
    command = [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict"]
    assert "--quiet" not in _check_mkdocs_step()
    # From another folder, as `mkdocs build -f <repo>/mkdocs.yml` in a user's script, one that
    # holds another Pulumi project with a stack of the same name as a drawn one: the figures
    # are drawn from the config file's project, never from the folder the build started in.
    (tmp_path / "Pulumi.yaml").write_text("name: another\nruntime: python\n")
    (tmp_path / "Pulumi.l4.yaml").write_text("config:\n  another:key: [unclosed\n")
    done = subprocess.run(
        [*command, "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,  # against a hang: 8-14 s idle, about a minute under load
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    shown = [
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if re.search(r"(^|<p>)```", page.read_text(), re.MULTILINE)
    ]
    assert shown == []
    # The headings after a marked block are headings, not code.
    assert 'id="tear-down"' in (site / "deploy" / "gke" / "index.html").read_text()


def _check_mkdocs_step() -> list[str]:
    """The mkdocs command line scripts/check runs (its STEPS)."""
    text = (ROOT / "scripts" / "check").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("MKDOCS = ")]
    return re.findall(r'"(--[a-z-]+)"', line)


def test_teardown_quotas_and_cost_are_one_click_from_the_front_page() -> None:
    front = (DOCS / "index.md").read_text()
    for page in ("deploy/teardown.md", "deploy/quotas.md", "deploy/cost.md"):
        assert f"]({page})" in front, page
        assert (DOCS / page).is_file()


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local
    missing = [link for link in local if not (ROOT / link).is_file()]
    assert missing == []
    for needle in ("pulumi destroy", "deploy/quotas.md", "deploy/cost.md", "deploy/teardown.md"):
        assert needle in text
