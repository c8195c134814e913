"""HTML to Markdown: tether's converter (BeautifulSoup's lxml tree, then markdownify) against the
``html-to-markdown`` package (Rust), CPU time per element, and on hostile text.

    python bench/html_markdown.py            # pages of 5,000 and 50,000 elements, and the hostile rows
    python bench/html_markdown.py --quick    # 5,000 only, and the smallest hostile row

``old`` is tether.tools.web.html_to_markdown (skipped, with a line saying so, when beautifulsoup4 or
markdownify is not installed). ``new`` is html_to_markdown.convert with the options a switch would
use (skipped likewise when the package is not installed: it is not one of tether's dependencies).
Both convert the same generated pages (headings, paragraphs with inline markup and links, lists,
tables, code blocks, scripts and styles to drop). Each figure is the best of 3 runs in CPU time
(time.process_time). The hostile rows are one paragraph left open (``<p>`` and no ``</p>``, as HTML allows) of N
words holding a bare ``&`` ("a&b a&b ..."): html-to-markdown 3.21.2 takes time growing with the
square of that text (closed, the same paragraph converts in linear time).
Writes bench/results/html_markdown.json.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import tether_commit, write_results

WORDS = ["valve", "seal", "pressure", "rated", "steam", "kit", "gasket", "flange", "bolt", "torque", "brass"]


def page(elements: int, seed: int = 1) -> tuple[str, int]:
    """A page of about ``elements`` elements, and how many it has."""
    r = random.Random(seed)

    def w(k: int) -> str:
        return " ".join(r.choice(WORDS) for _ in range(k))

    parts = ["<html><head><title>Catalogue</title><style>p { margin: 0 }</style></head><body><main>"]
    count = 0
    while count < elements:
        kind = r.randrange(10)
        if kind == 0:
            level = r.randint(1, 4)
            parts.append(f"<h{level}>{w(3)}</h{level}>")
            count += 1
        elif kind == 1:
            items = r.randint(2, 5)
            parts.append(
                "<ul>" + "".join(f"<li>{w(4)} <a href='/p/{i}'>{w(1)}</a></li>" for i in range(items)) + "</ul>"
            )
            count += 1 + 2 * items
        elif kind == 2:
            parts.append(
                f"<table><tr><th>{w(1)}</th><th>{w(1)}</th></tr><tr><td>{w(2)}</td><td>{count}</td></tr></table>"
            )
            count += 7
        elif kind == 3:
            parts.append(f"<pre><code>x = {r.randint(1, 9)}\n  y = [1,  2]\n</code></pre><script>var a = 1;</script>")
            count += 3
        elif kind == 4:
            parts.append(f"<div><span>{w(2)}</span> <em>{w(1)}</em> <br> {w(3)}</div>")
            count += 4
        else:
            parts.append(
                f"<p>{w(8)} <strong>{w(2)}</strong> {w(5)} <code>a_b*c</code> <a href='/r/{count}'>{w(2)}</a>.</p>"
            )
            count += 4
    parts.append("</main></body></html>")
    return "".join(parts), count


def hostile(words: int) -> str:
    """A paragraph left open, of ``words`` words holding a bare ampersand."""
    return "<html><body><p>" + "a&b " * words


def old_converter() -> Callable[[str], str] | None:
    try:
        import bs4  # noqa: F401
        import markdownify  # noqa: F401
    except ImportError:
        return None
    from tether.tools.web import html_to_markdown

    return html_to_markdown


def new_converter() -> Callable[[str], str] | None:
    try:
        from html_to_markdown import ConversionOptions, PreprocessingOptions, convert
    except ImportError:
        return None
    options = ConversionOptions(
        heading_style="atx",
        bullets="*+-",
        escape_asterisks=True,
        escape_underscores=True,
        skip_images=True,
        autolinks=False,
        extract_metadata=True,
        exclude_selectors=["svg", "iframe", "noscript", "template", "object", "embed", "canvas", "nav"],
        preprocessing=PreprocessingOptions(enabled=False),
    )
    return lambda html: convert(html, options).content or ""


def best_of(convert: Callable[[str], str] | None, html: str, runs: int) -> float | None:
    """The fastest of ``runs`` conversions in CPU seconds (None: the converter is not installed)."""
    if convert is None:
        return None
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        convert(html)
        best = min(best, time.process_time() - start)
    return best


def shown(value: float | None, width: int) -> str:
    return f"{'-' if value is None else value:>{width}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the page of 5,000 elements only")
    args = parser.parse_args()
    old, new = old_converter(), new_converter()
    if old is None:
        print("old: skipped (beautifulsoup4 or markdownify is not installed)")
    if new is None:
        print("new: skipped (html-to-markdown is not installed: pip install 'html-to-markdown>=3,<4')")
    rows: list[dict[str, Any]] = []
    print(f"{'page':>24} | {'old us/el':>9} | {'new us/el':>9} | {'ratio':>6}")
    for size in (5_000,) if args.quick else (5_000, 50_000):
        html, count = page(size)
        old_s, new_s = best_of(old, html, 3), best_of(new, html, 3)
        row: dict[str, Any] = {
            "page": f"{count:,} elements",
            "bytes": len(html.encode()),
            "old_us_per_element": None if old_s is None else round(old_s / count * 1e6, 2),
            "new_us_per_element": None if new_s is None else round(new_s / count * 1e6, 2),
            "ratio": None if old_s is None or new_s is None else round(old_s / new_s, 1),
        }
        rows.append(row)
        print(
            f"{row['page']:>24} | {shown(row['old_us_per_element'], 9)} | {shown(row['new_us_per_element'], 9)} | "
            f"{shown(row['ratio'], 5)}x"
        )
    print(f"\n{'hostile paragraph':>24} | {'old s':>9} | {'new s':>9} | {'ratio':>6}")
    for words in (100_000,) if args.quick else (100_000, 200_000, 400_000):
        html = hostile(words)
        old_s, new_s = best_of(old, html, 1), best_of(new, html, 1)
        row = {
            "page": f"{words:,} words, open <p>",
            "bytes": len(html.encode()),
            "old_s": None if old_s is None else round(old_s, 3),
            "new_s": None if new_s is None else round(new_s, 3),
            "ratio": None if old_s is None or new_s is None else round(old_s / new_s, 2),
        }
        rows.append(row)
        print(f"{row['page']:>24} | {shown(row['old_s'], 9)} | {shown(row['new_s'], 9)} | {shown(row['ratio'], 5)}x")
    try:
        from importlib.metadata import version

        library = version("html-to-markdown")
    except Exception:
        library = None
    write_results("html_markdown", {"commit": tether_commit(), "html_to_markdown": library, "rows": rows})


if __name__ == "__main__":
    main()
