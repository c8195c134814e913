"""Knowledge base, left alone until now: two first ``tether kb add`` runs at once into a new base
with different embedders both recorded theirs, and the base held vectors of two sizes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.knowledge.conftest import Opener

env = cli.env  # the fixtures of tests/cli, for these tests too

# Each child is the real command in a process of its own, held at the moment it has read the new
# base's embedder record (none yet) until the other has read it too: the interleaving two adds
# started together reach by chance (2 in 60 pairs here), every time.
CHILD = r"""
import sys, time
from pathlib import Path
from tether.cli import main
from tether.knowledge.store import SqliteKnowledgeStore

meeting, me = Path(sys.argv[1]), sys.argv[2]
real = SqliteKnowledgeStore.get_meta
held = []

def get_meta(self, key):
    value = real(self, key)
    if key == "embedder" and not held:
        held.append(1)
        (meeting / me).touch()
        end = time.monotonic() + 50  # a hang guard only: a loaded machine starts one child seconds after the other
        while len(list(meeting.iterdir())) < 2 and time.monotonic() < end:
            time.sleep(0.005)
    return value

SqliteKnowledgeStore.get_meta = get_meta
sys.exit(main(sys.argv[3:]))
"""


def _first_adds_at_once(tmp_path: Path, env: dict[str, str], first: str, second: str) -> list[tuple[int, str]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valves.md").write_text("# Valves\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(meeting), str(n), "kb", "add", str(docs), "--embedder", spec],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, spec in enumerate((first, second))
    ]
    return [(child.wait(timeout=60), child.communicate()[1]) for child in children]


@pytest.mark.parametrize(("first", "second"), [("hashing/64", "hashing/128"), ("hashing/64", "none")])
def test_two_first_adds_with_different_embedders_leave_one_embedder(
    tmp_path: Path, env: dict[str, str], first: str, second: str
) -> None:
    done = _first_adds_at_once(tmp_path, env, first, second)
    assert sorted(code for code, _ in done) == [0, 2], done
    db = sqlite3.connect(Path(env["TETHER_HOME"]) / "kb" / "default.db")
    recorded = db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()[0]
    sizes = {n for (n,) in db.execute("SELECT DISTINCT length(vec) FROM chunks WHERE vec IS NOT NULL")}
    db.close()
    winner, loser = (first, second) if done[0][0] == 0 else (second, first)
    assert recorded == winner
    assert sizes == ({int(winner.split("/")[1]) * 4} if winner != "none" else set())
    refusal = done[[first, second].index(loser)][1]
    assert f"built with the embedder {winner} (by another tether kb add, just now), not {loser}" in refusal
    assert "Traceback" not in refusal and "tether kb drop default --yes" in refusal
    # The base answers, by the embedder it records.
    found = cli.tether("kb", "search", "FVAM-2050-B", env=env)
    assert found.returncode == 0 and "valves.md" in found.stdout, found.stderr


def test_a_library_add_does_not_overwrite_the_embedder_another_recorded(tmp_path: Path) -> None:
    """A base with documents and no embedder recorded (keyword only so far), opened by two
    processes with different embedders: the first add records its own, and the other's add is
    refused before it writes a chunk, where it overwrote the record and mixed the vectors."""
    from tether.errors import ConfigError
    from tether.knowledge import HashingEmbedder, KnowledgeBase

    path = tmp_path / "kb.db"
    KnowledgeBase.open(path).add_text("a.md", "alpha\n")
    mine = KnowledgeBase.open(path, embedder=HashingEmbedder(64))
    other = KnowledgeBase.open(path, embedder=HashingEmbedder(128))
    other.add_text("b.md", "beta\n")
    with pytest.raises(ConfigError, match="built with the embedder hashing/128, not hashing/64"):
        mine.add_text("c.md", "gamma\n")
    assert mine.store.get_meta("embedder") == "hashing/128"
    assert sorted(d.name for d in other.documents()) == ["a.md", "b.md"]


# Postgres's claim_meta was checked once the same way (its server starts in 10 s, this file's budget).
@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_first_value_claimed_is_kept(open_kb: Opener) -> None:
    store = open_kb().store
    assert store.claim_meta("embedder", "hashing/64") == "hashing/64"
    assert store.claim_meta("embedder", "hashing/128") == "hashing/64"
    assert store.get_meta("embedder") == "hashing/64"


# --- HTML to Markdown: what markdownify makes of a page, pinned ----------------------------------

# What BeautifulSoup and markdownify made of each page (commit 650e5d8), to the character.
PAGES = [
    (
        "<html><head><title>Valves</title><style>p{}</style></head><body><h1>FVAM-2050-B</h1><p>Rated <b>16 bar"
        "</b>, seal kit <a href='/kits/SK-77'>SK-77</a>.</p><script>x()</script></body></html>",
        "# Valves\n\n# FVAM-2050-B\n\nRated **16 bar**, seal kit [SK-77](/kits/SK-77).",
    ),
    (
        "<main><ul><li>one<ul><li>two</li></ul></li><li>three</li></ul><ol start=3><li>a</li><li>b</li></ol>after</main>",
        "* one\n  + two\n* three\n\n3. a\n4. b\n\nafter",
    ),
    (
        "<table><thead><tr><th>part</th><th>bar</th></tr></thead><tbody><tr><td colspan=2>FVAM_2050*B</td></tr>"
        "</tbody></table>",
        "| part | bar |\n| --- | --- |\n| FVAM\\_2050\\*B | |",
    ),
    (
        "<article><pre><code>x = 1\n\n    y   =  2\n</code></pre><blockquote>quoted<br>twice</blockquote><dl><dt>"
        "term\nhere</dt><dd>its\ndefinition</dd></dl></article>",
        "```\nx = 1\n\n    y   =  2\n```\n\n> quoted\n> twice\n\nterm here\n:   its\n    definition",
    ),
    (
        "<p>a <!-- c --> b<?php echo 1 ?>   c</p><div>  \n  <p>x</p>  </div><ruby>漢<rt>  kan  </rt></ruby><code>a`b</code>",
        "a  b c\n\nx\n\n漢 kan `` a`b ``",
    ),
    (
        "<body><p>x</p><!DOCTYPE html>\x0c<p>\\<?php x ?></p><video src=v.mp4 poster=p.png>cap</video><h7>deep</h7>"
        "<hr><q>q</q></body>",
        'x\n\n\\\n\n[![cap](p.png)](v.mp4)\n\n###### deep\n\n---\n\n"q"',
    ),
]


@pytest.mark.parametrize(("page", "markdown"), PAGES)
def test_html_is_turned_into_the_markdown_it_was(page: str, markdown: str) -> None:
    from tether.tools.web import html_to_markdown

    assert html_to_markdown(page) == markdown
