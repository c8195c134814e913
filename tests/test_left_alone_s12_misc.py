"""Leftovers the last session noticed and left alone: a relative ``$TETHER_HOME``, the session
store's write probe, MCP tool names given twice, and pages markdownify could not convert."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tether.knowledge.readers import read_document
from tether.tools.web import html_to_markdown

# --- HTML to Markdown: pages markdownify raised on -------------------------------------------


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        # markdownify calls convert_<element name>: <soup> found its entry point convert_soup (TypeError)
        ("<p>Before <soup>tomato</soup> after.</p>", "Before tomato after."),
        ("<p><convert_soup>a</convert_soup> <process_tag>b</process_tag> <SOUP>c</SOUP></p>", "a b c"),
        # its int() of a list's start and a cell's colspan raised on these (ValueError)
        ('<ol start="三"><li>one</li><li>two</li></ol>', "1. one\n2. two"),
        ('<ol start="' + "9" * 5000 + '"><li>one</li></ol>', "1. one"),
        ('<ol start="7"><li>seven</li></ol>', "7. seven"),
        ('<table><tr><th colspan="²">h</th></tr><tr><td>v</td></tr></table>', "| h |\n| --- |\n| v |"),
        # a script inside an <svg> or <math> is dropped, not read as text
        ("<p>shown</p><svg><script>alert(1)</script></svg><math><script>no</script></math>", "shown"),
    ],
)
def test_odd_markup_converts(page: str, expected: str) -> None:
    assert html_to_markdown(page) == expected


def test_deep_nesting_converts_with_every_word() -> None:
    """Markdownify recursed once a level: 400 nested elements overflowed Python's stack, and both
    callers refused the page ("nests its HTML too deeply"). Deep parts now come as text."""
    page = "<main><h1>Top</h1>" + "<div>" * 3000 + "<p>deep one</p><p>deep <b>two</b></p>" + "</div>" * 3000
    text = html_to_markdown(page + "<p>after</p></main>")
    assert text.startswith("# Top") and text.endswith("after")
    assert re.search(r"deep one\s+deep\s+two", text)


def test_a_page_a_knowledge_base_reads(tmp_path: Path) -> None:
    """``kb add`` skipped such a file ("HTML nested too deeply"; a <soup> one with TypeError's words)."""
    page = tmp_path / "recipe.html"
    body = "<section>" * 600 + "<soup>Stock</soup> and <b>salt</b>" + "</section>" * 600
    page.write_text(f"<html><head><title>Soup</title></head><body>{body}</body></html>")
    document = read_document(page)
    assert document.title == "Soup" and "Stock" in document.text and "salt" in document.text


def test_a_long_numbered_list_is_read_in_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Markdownify numbers each item of an <ol> by finding every item before it: 20,000 items took
    about a minute of a core (on web_fetch's thread, holding the interpreter). The list is cut into
    consecutive lists numbered on from its start; the items counted stay about 100 per item."""
    from bs4.element import PageElement

    counted = []
    finder = PageElement.find_previous_siblings

    def counting(self: PageElement, *args: object, **kwargs: object) -> object:
        found = finder(self, *args, **kwargs)  # type: ignore[arg-type]
        counted.append(len(found))
        return found

    monkeypatch.setattr(PageElement, "find_previous_siblings", counting)
    page = '<ol start="3">' + "".join(f"<li>item {i}</li>" for i in range(1000)) + "</ol>"
    pairs = re.findall(r"^(\d+)\. item (\d+)$", html_to_markdown(page), re.M)
    assert [(int(n), int(i)) for n, i in pairs] == [(i + 3, i) for i in range(1000)]
    assert len(counted) == 1000 and sum(counted) <= 1000 * 100  # was 499,500: every item's elders
