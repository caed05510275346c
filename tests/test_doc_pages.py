"""The documentation's shape: a guide page (the navigation's "Deploying" and "Using" sections)
is read through, so it fits in about five screens; a reference page is looked things up in, so
it may be long but opens with a summary and a table of contents."""

from __future__ import annotations

import re

from markdown.extensions.toc import slugify  # type: ignore[import-untyped]

from tests.test_docs import DOCS, mkdocs_config, nav_pages

#: About five screens of 1280 x 900 at the site's type: ~400 words of prose a screen.
GUIDE_WORDS = 2000


def section(name: str) -> list[str]:
    """The pages of one top-level section of the navigation."""
    nav = mkdocs_config()["nav"]
    assert isinstance(nav, list)
    (found,) = [item[name] for item in nav if isinstance(item, dict) and name in item]
    return nav_pages(found)


def words(text: str) -> int:
    """The words a reader reads: prose and tables, without code blocks and HTML comments."""
    text = re.sub(r"^```.*?^```", " ", text, flags=re.M | re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    return sum(1 for token in text.split() if re.search(r"\w", token))


def test_every_guide_page_fits_in_about_five_screens() -> None:
    counts = {page: words((DOCS / page).read_text()) for page in section("Deploying")}
    counts |= {page: words((DOCS / page).read_text()) for page in section("Using")}
    over = {page: n for page, n in counts.items() if n > GUIDE_WORDS}
    assert over == {}, f"over {GUIDE_WORDS} words: {over}"


def test_a_code_block_is_not_counted_as_words() -> None:
    text = "One two.\n```bash\nthree four five\n```\n<!-- six -->\n| a | b |\n|---|---|\n"
    assert words(text) == 4


def opening(text: str) -> tuple[str, str]:
    """The text between the title and the first second-level heading, and the rest."""
    body = re.sub(r"<!--.*?-->", "", text, flags=re.S).split("\n# ", 1)[-1]
    head, _, rest = body.partition("\n## ")
    return head.split("\n", 1)[1].strip(), "## " + rest


def test_every_reference_page_opens_with_a_summary_and_a_table_of_contents() -> None:
    """A summary paragraph first. A hand-written page then lists a link to each of its
    sections, in order (it may list subsections too); a generated one (docs/reference/) has
    the theme's table of contents beside it, built from its sections."""
    for page in section("Reference"):
        head, rest = opening((DOCS / page).read_text())
        first = head.split("\n\n", 1)[0]
        assert first and not first.startswith(("#", "-", "|", "```", "!")), page
        assert len(re.findall(r"^###? ", rest, re.M)) >= 2, page
        if page.startswith("reference/"):
            continue
        listed = re.findall(r"^- \[[^]]+\]\(#([^)]+)\)", head, re.M)
        sections = [slugify(h, "-") for h in re.findall(r"^## (.+)$", rest, re.M)]
        assert [anchor for anchor in listed if anchor in sections] == sections, page
