"""Round s15 of attacks on the tools and the sandbox: what earlier rounds left alone.

- a key kept outside a hidden folder and linked into it (tether's ``config.toml`` holding an
  ``api_key``, linked from a dotfiles repository as the config reading allows; ``~/.ssh/id_rsa``
  linked from a key drive) was readable by every sandboxed command at the link's target: the
  sandbox covered the folder, so the link, not the file it names;
- ``edit_file`` on a file another program wrote between the edit's read and its rename put back the
  old content with the one change, and what that program wrote was lost without a word;
- a tool that returned NaN or infinity gave the model ``NaN`` / ``Infinity``, which is not JSON,
  where the docs promise JSON;
- ``web_fetch`` of a host name with a part longer than 63 characters, or redirected to ``mailto:``,
  failed with Python's or httpx's own exception (``encoding with 'idna' codec failed``) instead of
  a message saying what was wrong.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.tools.sandboxed import needs_sandbox
from tether import Agent, run_sync
from tether.cancel import CancelSignal
from tether.messages import AssistantMessage, Message, ToolCallPart, ToolMessage
from tether.testing import FunctionModel
from tether.tools import files
from tether.tools.base import ToolContext, ToolError, tool, validate_arguments
from tether.tools.files import edit_file
from tether.tools.shell import RunCommand, ShellSettings
from tether.tools.web import WebFetch, WebSettings


def call(t: Any, cwd: Path, arguments: dict[str, Any]) -> Any:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return asyncio.run(t.execute(validate_arguments(t, json.dumps(arguments)), ctx))


def strict_json(text: str) -> Any:
    """JSON as every reader but Python's takes it: no ``NaN``, no ``Infinity``."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


# --- secrets linked into a hidden folder ---------------------------------------------------------


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's /tmp is its own, so a secret there proves nothing)."""
    root = Path(tempfile.mkdtemp(prefix="tether-s15-", dir="/var/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@needs_sandbox
def test_a_key_linked_into_a_hidden_folder_is_hidden_where_it_is_kept(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, thome, dots, keys, ws = (outside / n for n in ("home", "thome", "dotfiles", "keydrive", "ws"))
    for folder in (home / ".ssh", thome, dots, keys, ws):
        folder.mkdir(parents=True)
    (dots / "tether.toml").write_text('api_key = "sk-LINKED-CONFIG-KEY"\n')
    (thome / "config.toml").symlink_to(dots / "tether.toml")
    (keys / "id_rsa").write_text("-----BEGIN LINKED PRIVATE KEY-----\n")
    (home / ".ssh" / "id_rsa").symlink_to(keys / "id_rsa")
    (dots / "vimrc").write_text("set number\n")  # beside the key, and no secret: still readable
    monkeypatch.setenv("TETHER_HOME", str(thome))
    monkeypatch.setenv("HOME", str(home))

    command = f"cat {dots}/tether.toml {keys}/id_rsa {thome}/config.toml {home}/.ssh/id_rsa; cat {dots}/vimrc"
    out = call(RunCommand(ShellSettings()), ws, {"command": command})
    text = out if isinstance(out, str) else str(out.content)

    assert "sk-LINKED-CONFIG-KEY" not in text
    assert "LINKED PRIVATE KEY" not in text
    assert "set number" in text  # the folder the key is kept in is not hidden whole
    assert "hidden by the sandbox" in text  # and the model is told why it could not read them


@needs_sandbox
def test_a_command_cannot_move_a_secret_out_of_its_hidden_path(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tether run in the home: the sandbox hides ``.local/share/tether`` and ``.config/gcloud`` by
    their paths, so a command that renamed a folder above them (``mv .local .l``) made the next
    command hide nothing there, and it read tether's key at its new path."""
    home = outside / "home"
    (home / ".local" / "share" / "tether").mkdir(parents=True)
    (home / ".local" / "share" / "tether" / "config.toml").write_text('api_key = "sk-MOVED-OUT-KEY"\n')
    (home / ".config" / "gcloud").mkdir(parents=True)
    (home / ".config" / "gcloud" / "credentials.db").write_text("MOVED-OUT-GCLOUD\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TETHER_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    shell = RunCommand(ShellSettings())

    moved = call(
        shell, home, {"command": "mv .local .l; mv .config .c; mv .local/share .local/s; touch .local/made; ls -a"}
    )
    text = call(shell, home, {"command": "cat .l/share/tether/config.toml .c/gcloud/credentials.db .local/s/tether/*"})
    text = text if isinstance(text, str) else str(text.content)

    assert "MOVED-OUT" not in text
    assert sorted(p.name for p in (home / ".local").iterdir()) == ["made", "share"]  # writable, not movable
    assert (home / ".config" / "gcloud" / "credentials.db").exists()
    assert "Device or resource busy" in (moved if isinstance(moved, str) else str(moved.content))


def test_the_file_tools_do_not_give_the_model_the_keys_commands_cannot_see(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tether run in the home: the sandbox hid ``~/.ssh`` and tether's own home from commands, but
    ``read_file`` and ``search_files`` gave the model the keys, and a link a command planted
    (``ln -s .local/share/tether/config.toml k``, legal in the sandbox) let it read them by another name."""
    home = outside / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN HOME PRIVATE KEY-----\n")
    (home / ".local" / "share" / "tether").mkdir(parents=True)
    (home / ".local" / "share" / "tether" / "config.toml").write_text('api_key = "sk-HOME-CONFIG-KEY"\n')
    (home / "project").mkdir()
    (home / "project" / "app.py").write_text('token = "sk-not-a-secret-of-tether"\n')
    (home / "k").symlink_to(".local/share/tether/config.toml")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TETHER_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    tools = {t.name: t for t in (*files.FILE_TOOLS, *files.EDIT_TOOLS)}

    for path in (".ssh/id_rsa", "k", f"{home}/.local/share/../share/tether/config.toml", ".local/share/tether"):
        with pytest.raises(ToolError, match="where keys and credentials are kept"):
            call(tools["read_file"], home, {"path": path})
    with pytest.raises(ToolError, match="where keys and credentials are kept"):
        call(tools["write_file"], home, {"path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker"})
    with pytest.raises(ToolError, match="where keys and credentials are kept"):
        call(tools["edit_file"], home, {"path": "k", "old_text": "sk-", "new_text": "pk-"})
    found = call(tools["search_files"], home, {"pattern": "sk-|PRIVATE"})
    listed = call(tools["list_files"], home, {})

    assert "HOME-CONFIG-KEY" not in found and "PRIVATE KEY" not in found
    assert "project/app.py:1:" in found  # the rest of the home is searched as before
    assert "not looked into: .local/share/tether, .ssh" in found and "not looked into" in listed
    assert "id_rsa" not in listed and "config.toml" not in listed and "project/app.py" in listed
    assert not (home / ".ssh" / "authorized_keys").exists()
    assert call(tools["read_file"], home / ".ssh", {"path": "id_rsa"}).startswith("-----BEGIN")  # a workspace in one


# --- edit_file and another program writing the same file -----------------------------------------


def _appended(path: Path) -> None:
    subprocess.run(["/bin/sh", "-c", 'printf "written by the other program\\n" >> "$0"', str(path)], check=True)


def _saved_by_rename(path: Path) -> None:  # as editors save: a new file renamed over the old one
    new = path.with_name(path.name + ".swp")
    new.write_text(path.read_text().replace("beta", "BETA"))
    os.replace(new, path)


@pytest.mark.parametrize("writer", [_appended, _saved_by_rename], ids=["appends", "saves-by-rename"])
def test_an_edit_never_drops_what_another_program_wrote_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: Any
) -> None:
    """The other program writes after the edit read the file and before it renamed its new content
    over it: the point is chosen, not raced (the edit's own step between the two runs it)."""
    target = tmp_path / "notes.txt"
    target.write_text("alpha\nbeta\n")
    replace_once = files._replace_once

    def with_a_writer(*args: Any) -> str:
        writer(target)
        return replace_once(*args)

    monkeypatch.setattr(files, "_replace_once", with_a_writer)
    with pytest.raises(ToolError, match="changed while it was being edited") as refused:
        call(edit_file, tmp_path, {"path": "notes.txt", "old_text": "alpha", "new_text": "ALPHA"})

    kept = target.read_text()
    assert "ALPHA" not in kept and ("written by the other program" in kept or "BETA" in kept)
    assert "Read the file again" in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no temporary file left

    monkeypatch.setattr(files, "_replace_once", replace_once)  # read again, the edit goes through
    call(edit_file, tmp_path, {"path": "notes.txt", "old_text": "alpha", "new_text": "ALPHA"})
    assert target.read_text() == kept.replace("alpha", "ALPHA")


# --- NaN and infinity returned by a tool -----------------------------------------------------------


def test_a_tool_that_returns_nan_or_infinity_gives_the_model_json() -> None:
    @tool(read_only=True)
    def stats() -> dict[str, Any]:
        """Summary statistics of an empty column."""
        return {"mean": math.nan, "max": -math.inf, "ratio": math.inf, "n": 0, "by_day": {"mon": [1.5, math.nan]}}

    @tool(read_only=True)
    def mean() -> float:
        """The mean of nothing."""
        return math.nan

    seen: list[Message] = []

    def model(messages: list[Message], request: Any) -> Any:
        if len(messages) == 1:
            return AssistantMessage(
                content=(
                    ToolCallPart(id="a", name="stats", arguments="{}"),
                    ToolCallPart(id="b", name="mean", arguments="{}"),
                )
            )
        seen.extend(messages[1:])
        return "The column is empty."

    result = run_sync(Agent(FunctionModel(model), tools=[stats, mean]), "Summarise the column.")
    assert result.status == "completed"
    texts = {m.call_id: m.text for m in seen if isinstance(m, ToolMessage)}
    assert strict_json(texts["a"]) == {
        "mean": "NaN",
        "max": "-Infinity",
        "ratio": "Infinity",
        "n": 0,
        "by_day": {"mon": [1.5, "NaN"]},
    }
    assert strict_json(texts["b"]) == "NaN"


# --- web_fetch of odd but legal addresses ------------------------------------------------------------

LONG_LABEL = "a" * 64 + ".example"


class _Redirects(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header(
            "Location", {"/mailto": "mailto:someone@example.com", "/long": f"http://{LONG_LABEL}/"}[self.path]
        )
        self.end_headers()


@pytest.fixture
def redirects() -> Iterator[tuple[WebFetch, int]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirects)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield WebFetch(WebSettings(allow=(f"127.0.0.1:{server.server_address[1]}",))), server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("path", "said"),
    [("/mailto", "redirects to an address that is not a URL web_fetch can follow"), ("/long", "not a valid host name")],
)
def test_an_odd_address_or_redirect_is_a_message(redirects: Any, path: str, said: str) -> None:
    fetch, port = redirects
    with pytest.raises(ToolError, match=said):
        call(fetch, Path("."), {"url": f"http://127.0.0.1:{port}{path}"})


def test_a_host_name_with_a_part_too_long_is_a_message() -> None:
    with pytest.raises(ToolError, match=f"could not resolve {LONG_LABEL}: it is not a valid host name"):
        call(WebFetch(), Path("."), {"url": f"http://{LONG_LABEL}/"})
