"""HTML to Markdown (``web_fetch`` and the knowledge base's HTML reader): time per element, now and
before, in the same run.

    python bench/html_to_markdown.py            # pages of 5,000 and 50,000 elements
    python bench/html_to_markdown.py --quick    # 5,000 only

``before`` is the converter as it was at commit 650e5d8 (BeautifulSoup's tree, then markdownify),
kept here whole; ``now`` is tether.tools.web.html_to_markdown. Both convert the same generated pages
(headings, paragraphs with inline markup and links, lists, tables, code blocks, scripts and styles
to drop), and their outputs must be equal. Each figure is the best of 3 runs in CPU time
(time.process_time: other work on the machine adds little to it). Writes bench/results/html.json.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import tether_commit, write_results
from tether.tools.web import html_to_markdown as now

WORDS = [
    "valve",
    "seal",
    "pressure",
    "rated",
    "steam",
    "kit",
    "gasket",
    "flange",
    "bolt",
    "torque",
    "thread",
    "brass",
    "steel",
]


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
                f"<table><tr><th>{w(1)}</th><th>{w(1)}</th></tr><tr><td>{w(2)}</td><td>{r.randint(1, 999)}</td></tr></table>"
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


# --- the converter before: tether/tools/web.py at commit 650e5d8 ----------------------------------

_SPACES = re.compile(r"[\t \r\n]+")
_SPACES_2 = re.compile(r"[\t \r\n]{2,}")
_PRE_RUN = 64
_PRE_SPACES = re.compile(rf"[ \n]{{{_PRE_RUN + 1},}}")


def _calm_whitespace(main: Any) -> None:
    """Shorten the runs of white space markdownify would backtrack over: its regexes rescan a run from
    each of its characters (40 kB of spaces held the GIL for 33 s: the whole process stood still;
    2 MB, a day). Outside ``<pre>`` a run becomes what markdownify makes of it anyway (a line break if
    it holds one, else a space); inside, a run longer than 64 is cut to 64."""
    from bs4.element import NavigableString

    in_pre: dict[int, bool] = {}  # per element: whether it is, or is inside, a <pre>
    for text in list(main.find_all(string=True)):
        if type(text) is not NavigableString:  # comments and the like are not shown
            continue
        if _inside_pre(text, in_pre):
            calm = _PRE_SPACES.sub(lambda m: m.group()[:_PRE_RUN], text)
        elif _SPACES_2.search(text):
            calm = _SPACES.sub(lambda m: "\n" if "\n" in m.group() or "\r" in m.group() else " ", text)
        else:
            continue
        if calm != text:
            text.replace_with(calm)


def _inside_pre(node: Any, known: dict[int, bool]) -> bool:
    """Whether ``node`` has a ``<pre>`` above it; ``known`` remembers each element's answer, so a
    page of thousands of nested elements is walked once, not once per string."""
    climbed = []
    element = node.parent
    while element is not None and id(element) not in known:
        climbed.append(element)
        element = element.parent
    inside = known[id(element)] if element is not None else False
    for element in reversed(climbed):
        inside = inside or element.name == "pre"
        known[id(element)] = inside
    return inside


def before(html: str) -> str:
    """tether.tools.web.html_to_markdown as it was at commit 650e5d8: BeautifulSoup and markdownify."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    # lxml (libxml2) parses in linear time. Python 3.11's html.parser is quadratic on constructs left
    # open (CVE-2025-6069): a 1 MB page of "</" or "<?" held a core for three minutes.
    soup = BeautifulSoup(html, "lxml")
    for tag in soup(["script", "style", "noscript", "svg", "iframe", "template"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    _calm_whitespace(main)
    title = soup.title.get_text(strip=True) if soup.title else ""
    text = MarkdownConverter(heading_style="ATX", strip=["img"]).convert_soup(main).strip()
    lines = [ln.rstrip() for ln in text.splitlines()]
    compact = "\n".join(ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1]))
    return f"# {title}\n\n{compact}" if title else compact


# --- the run -------------------------------------------------------------------------------------


def best_of(convert: Callable[[str], str], html: str, runs: int = 3) -> tuple[float, str]:
    """The fastest of ``runs`` conversions in CPU seconds, and the output."""
    best, out = float("inf"), ""
    for _ in range(runs):
        start = time.process_time()
        out = convert(html)
        best = min(best, time.process_time() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the page of 5,000 elements only")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    print(f"{'elements':>9} | {'before us/el':>12} | {'now us/el':>9} | {'ratio':>6} | same output")
    for size in (5_000,) if args.quick else (5_000, 50_000):
        html, count = page(size)
        before_s, before_out = best_of(before, html)
        now_s, now_out = best_of(now, html)
        row = {
            "elements": count,
            "bytes": len(html.encode()),
            "before_us_per_element": round(before_s / count * 1e6, 2),
            "now_us_per_element": round(now_s / count * 1e6, 2),
            "ratio": round(before_s / now_s, 2),
            "same_output": before_out == now_out,
        }
        rows.append(row)
        print(
            f"{count:>9,} | {row['before_us_per_element']:>12} | {row['now_us_per_element']:>9} | "
            f"{row['ratio']:>5}x | {row['same_output']}"
        )
        if not row["same_output"]:
            raise SystemExit("the outputs differ: the converter changed what it writes")
    write_results("html", {"commit": tether_commit(), "cpu_seconds_best_of": 3, "pages": rows})


if __name__ == "__main__":
    main()
