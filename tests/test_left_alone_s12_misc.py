"""Leftovers the last session noticed and left alone: a relative ``$TETHER_HOME``, the session
store's write probe, MCP tool names given twice, and pages markdownify could not convert."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tether.errors import ConfigError
from tether.harness.agent import Agent
from tether.harness.extension import Extension
from tether.harness.loop import run
from tether.harness.state import RunState
from tether.knowledge.readers import read_document
from tether.testing import FunctionModel
from tether.tools.base import tool
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


def test_only_markdownifys_own_non_converters_are_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyproject allows markdownify from 0.13, whose converters take ``convert_as_inline``, not
    ``parent_tags``: the names stripped are those whose parameters are not a converter's, in
    whichever release is installed (else every element would be stripped: no link, no heading)."""
    import markdownify

    from tether.tools import web

    class Older:  # markdownify 0.13's shapes
        def convert_soup(self, soup: object) -> None: ...
        def convert_p(self, el: object, text: str, convert_as_inline: bool) -> None: ...
        def convert_a(self, el: object, text: str, convert_as_inline: bool) -> None: ...

    monkeypatch.setattr(markdownify, "MarkdownConverter", Older)
    assert web._not_converters.__wrapped__() == ("soup",)


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


# --- MCP: "two tools are named X" names where each came from ---------------------------------


@tool(name="inventory__stock")
def _stock(part: str) -> str:
    """The stock of a part, from the warehouse's own system."""
    return "12"


class _Notes(Extension):
    name = "notes"

    def __init__(self, given: Sequence[Any]) -> None:
        self.given = given

    def tools(self) -> Sequence[Any]:
        return self.given


# A stdio MCP server written raw (no SDK to import: it starts at once) with one tool, stock.
RAW_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "stock", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [{"type": "text", "text": "12"}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}) + "\\n")
    sys.stdout.flush()
"""


def test_a_tool_named_like_a_servers_says_which_server_and_which_tool(tmp_path: Path) -> None:
    """Was: "two tools are named 'inventory__stock'; tool names must be unique", naming neither the
    server (which [mcp.NAME] entry) nor the agent's own tool."""
    pytest.importorskip("mcp", reason="needs tether[mcp] (the [test] extra installs it)")  # an optional extra
    from tether.connectors import McpConnector

    (tmp_path / "server.py").write_text(RAW_SERVER)
    asked: list[int] = []
    server = McpConnector("inventory", {"command": sys.executable, "args": [str(tmp_path / "server.py")]})
    agent = Agent(
        FunctionModel(lambda m, r: asked.append(1) or "hi"), tools=[_stock], extensions=[server], cwd=tmp_path
    )
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(run(agent, "go", state=RunState()), 60))
    assert str(err.value) == (
        "two tools are named 'inventory__stock': the agent's tool from tests.test_left_alone_s12_misc._stock "
        "(in Agent.tools), and the "
        "tool 'stock' of the MCP server 'inventory' ([mcp.inventory]). Tool names must be unique: rename "
        "one of them or leave it out"
    )
    assert asked == []  # the model was not asked


def test_two_extensions_giving_one_name_are_both_named(tmp_path: Path) -> None:
    agent = Agent(FunctionModel(lambda m, r: "hi"), extensions=[_Notes([_stock]), _Notes([_stock])], cwd=tmp_path)
    with pytest.raises(ConfigError, match="a tool of the extension 'notes', and a tool of the extension 'notes'"):
        asyncio.run(run(agent, "go", state=RunState()))


# --- the session store's write probe ---------------------------------------------------------


def test_a_probe_left_by_a_killed_process_is_removed_and_no_other(tmp_path: Path) -> None:
    """Each open makes ``.probe-<pid>-<random>`` and removes it: a kill in between left the empty
    file in the sessions folder for ever. The next open removes it once its process is gone; a live
    process's probe, a file with something in it, and a link at such a name stay."""
    from tether.sessions import JsonlSessionStore

    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()  # reaped: its pid names no process now
    root = tmp_path / "sessions"
    JsonlSessionStore(root)
    left = root / f".probe-{gone.pid}-{'0' * 16}"
    live = root / f".probe-{os.getpid()}-{'1' * 16}"
    kept = root / f".probe-{gone.pid}-{'2' * 16}"
    link = root / f".probe-{gone.pid}-{'3' * 16}"
    left.touch()
    live.touch()
    kept.write_text("not a probe's")
    link.symlink_to(tmp_path / "elsewhere")
    JsonlSessionStore(root)
    assert sorted(p.name for p in root.iterdir()) == sorted([live.name, kept.name, link.name])


# --- a relative $TETHER_HOME -----------------------------------------------------------------


@pytest.fixture
def relative_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``TETHER_HOME=th`` typed in the folder ``start``; returns where that home is."""
    start = tmp_path / "start"
    start.mkdir()
    monkeypatch.chdir(start)
    monkeypatch.setenv("TETHER_HOME", "th")
    for name in ("TETHER_MODEL", "TETHER_SESSION_STORE", "LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return start / "th"


def test_a_relative_home_is_said_as_the_absolute_folder_it_is(
    relative_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether config path` printed th/config.toml: a path that means another file from any other folder."""
    from tests.cli.conftest import run_main

    assert run_main("config", "path", capsys=capsys) == (0, f"{relative_home / 'config.toml'}\n", "")


def test_a_relative_home_stays_where_it_was_read_when_the_folder_changes(
    relative_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process that changes folder (a server, code embedding tether) read a relative home again
    from the new folder: an empty home, where the run just made was not."""
    from tests.cli.conftest import run_main

    code, out, err = run_main("run", "--model", "scripted/hello", "--cwd", str(tmp_path), "hi", capsys=capsys)
    assert code == 0, err
    (run_id,) = [p.name for p in (relative_home / "runs").iterdir()]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run_main("runs", capsys=capsys)
    assert code == 0 and run_id in out, err
    assert not (elsewhere / "th").exists()


def test_a_server_given_a_relative_home_does_not_hide_words_that_end_like_it(relative_home: Path) -> None:
    """`TETHER_HOME=th tether serve` wrote the home as $TETHER_HOME in what its clients read, and
    "th" was found inside words: "with both paths" became "wi$TETHER_HOME bo$TETHER_HOME paths"."""
    from tether.config import load_settings
    from tether.server.events import hide_home

    home = load_settings().home
    assert hide_home("answered with both paths", home) == "answered with both paths"
    assert hide_home(f"cannot write {relative_home}/runs", home) == "cannot write $TETHER_HOME/runs"


# --- SIGTERM while the tether command imports tether -----------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")  # Windows has no SIGTERM to send
def test_sigterm_while_the_command_imports_tether_is_one_line_and_130(tmp_path: Path) -> None:
    """The console script imported tether.cli (and tether, typing, re, argparse) before main()
    installed any handler: SIGTERM there killed the command silently (exit -15). The entry point is
    now _tether_start.main, which catches it first. Here ``import tether`` is held at a point the
    test knows (a stand-in package that says so, then waits), and the signal is sent there."""
    import signal

    import _tether_start

    stand_in = tmp_path / "path" / "tether"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("import sys\nprint('importing', flush=True)\nsys.stdin.readline()\n")
    start = Path(_tether_start.__file__).parent
    script = "import sys\nfrom _tether_start import main\nsys.exit(main())\n"  # what pip writes for it
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "--help"],
        env={**os.environ, "PYTHONPATH": f"{stand_in.parent}{os.pathsep}{start}"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "importing\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "\ntether: terminated (SIGTERM)\n")


def test_the_tether_command_is_the_entry_point_that_catches_it() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["tether"] == "_tether_start:main"
