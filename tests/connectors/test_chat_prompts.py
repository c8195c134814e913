"""An MCP server's prompts as /commands in ``tether chat``: ``/PROMPT key=value`` (or
``/SERVER:PROMPT``) fills the prompt in and sends it as the user's message."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

SERVER = Path(__file__).with_name("prompt_server.py")


def test_a_prompt_becomes_the_message_and_a_bad_one_is_explained(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[mcp.notes]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n')
    env = {**os.environ, "TETHER_HOME": str(home)}
    stdin = "/review file=a.py tone=blunt\n/notes:review file=b.py\n/review a.py\n/nothing x=1\n/exit\n"
    args = ["tether", "chat", "--model", "scripted/hello", "--mcp", "notes", "--cwd", str(tmp_path), "--session", "p"]
    out = subprocess.run(args, input=stdin, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "/review: write its arguments as key=value" in out.stderr
    assert "/nothing is neither a command" in out.stderr and "a prompt of notes" in out.stderr
    exported = subprocess.run(
        ["tether", "sessions", "export", "p"], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    lines = [json.loads(x) for x in exported.stdout.splitlines()]
    sent = [part["text"] for m in lines if m["role"] == "user" for part in m["content"]]
    assert sent == ["Please review a.py in a blunt tone.", "Please review b.py in a kind tone."]


def test_a_mentioned_resource_is_sent_with_the_message_and_a_bad_one_sends_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[mcp.notes]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n')
    env = {**os.environ, "TETHER_HOME": str(home)}
    stdin = (
        "follow @notes:notes://guide, please.\n"
        "and @notes:notes://day/3 too\n"
        "what about @notes:notes://missing\n"
        "mail me at ada@example.com:8080 or @elsewhere:x://y\n"
        "/exit\n"
    )
    args = ["tether", "chat", "--model", "scripted/hello", "--mcp", "notes", "--cwd", str(tmp_path), "--session", "m"]
    out = subprocess.run(args, input=stdin, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "@notes:notes://missing could not be read" in out.stderr and "nothing was sent" in out.stderr
    exported = subprocess.run(
        ["tether", "sessions", "export", "m"], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    lines = [json.loads(x) for x in exported.stdout.splitlines()]
    sent = [part["text"] for m in lines if m["role"] == "user" for part in m["content"]]
    sent = [re.sub(r"resource-[0-9a-f]{12}\b", "resource-KEY", s) for s in sent]  # a new random key each message
    assert sent == [
        'follow @notes:notes://guide, please.\n\n<resource-KEY server="notes" uri="notes://guide">\n'
        "[resource notes://guide (text/plain)]\nWrite notes in the present tense.\n</resource-KEY>",
        'and @notes:notes://day/3 too\n\n<resource-KEY server="notes" uri="notes://day/3">\n'
        "[resource notes://day/3 (text/plain)]\nNotes of day 3: nothing yet.\n</resource-KEY>",
        "mail me at ada@example.com:8080 or @elsewhere:x://y",  # not a server of this chat: as typed
    ]


def test_mentions_are_found_only_where_they_are_mentions() -> None:
    from tether.connectors.mentions import mentions

    assert mentions("see @docs:file:///a/b.md, and @docs:file:///a/b.md.") == [("docs", "file:///a/b.md")]
    assert mentions("(@x:demo://r/1) @y:notes://day/2!") == [("x", "demo://r/1"), ("y", "notes://day/2")]
    assert mentions("ada@example.com:8080 @@x:a://b @x:no-scheme @x: a://b") == []
