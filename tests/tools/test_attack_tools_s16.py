"""Round s16 of attacks on the tools and the sandbox.

- tether's own stores and traces kept outside its home (``session_store =
  "sqlite:/srv/tether/sessions.db"``, ``--session-store jsonl:DIR``, a ``RunStore`` or
  ``JsonlTracer`` given a folder in code) were readable by every sandboxed command: the sandbox hid
  tether's home only, and these hold every conversation;
- ``web_search`` against a SearXNG that is down, or that answers with what is not its JSON, gave
  the model the library's own words (``All connection attempts failed``, ``Expecting value: line 1
  column 1 (char 0)``, ``'list' object has no attribute 'get'``) instead of what happened and
  what to do.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.tools.sandboxed import needs_sandbox
from tether.cancel import CancelSignal
from tether.harness.store import RunStore
from tether.messages import TextPart, UserMessage
from tether.sessions import JsonlSessionStore, SqliteSessionStore
from tether.tools import files
from tether.tools.base import ToolContext, ToolError, validate_arguments
from tether.tools.shell import RunCommand, ShellSettings
from tether.tools.web import SearxngBackend, WebSearch
from tether.tracing import JsonlTracer


def call(t: Any, cwd: Path, arguments: dict[str, Any]) -> Any:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return asyncio.run(t.execute(validate_arguments(t, json.dumps(arguments)), ctx))


def text_of(out: Any) -> str:
    return out if isinstance(out, str) else str(out.content)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's /tmp is its own, so a secret there proves nothing)."""
    root = Path(tempfile.mkdtemp(prefix="tether-s16-", dir="/var/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- tether's stores kept outside its home ---------------------------------------------------------


@needs_sandbox
def test_stores_and_traces_kept_outside_tethers_home_are_hidden_from_commands(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thome, data, ws = outside / "thome", outside / "srv", outside / "ws"
    for folder in (thome, data, ws):
        folder.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(thome))
    JsonlSessionStore(data / "sessions").append(
        "s1", [UserMessage(content=(TextPart(text="JSONL-CONVERSATION-SECRET"),))]
    )
    # Held open through the command, as a server holds it: its -wal is there the whole time (one
    # let go was closed whenever the collector came, and its -wal vanished while the sandbox was
    # being built).
    held = SqliteSessionStore(data / "sessions.db")
    held.append("s1", [UserMessage(content=(TextPart(text="SQLITE-CONVERSATION-SECRET"),))])
    RunStore(data / "runs")
    (data / "runs").mkdir(exist_ok=True)  # made at a run's first save
    (data / "runs" / "r1.json").write_text("RUN-TRANSCRIPT-SECRET")
    JsonlTracer(data / "traces")
    (data / "traces").mkdir(exist_ok=True)  # made at a run's first line
    (data / "traces" / "r1.jsonl").write_text("TRACE-SECRET")
    JsonlTracer(thome / "traces")
    (thome / "traces").mkdir()  # inside tether's home, hidden already: a second cover must not break it
    (data / "notes.txt").write_text("beside the stores, not tether's")

    command = f"cat {data}/sessions/* {data}/sessions.db* {data}/runs/* {data}/traces/*; grep -ra SECRET {data}; cat {data}/notes.txt"
    said = text_of(call(RunCommand(ShellSettings()), ws, {"command": command}))

    assert "SECRET" not in said.replace("grep -ra SECRET", "")
    assert "beside the stores, not tether's" in said  # the command ran, and the folder is not hidden whole
    assert (data / "sessions.db-wal").exists()
    del held


@needs_sandbox
def test_a_home_given_in_code_is_hidden_from_commands(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``create_app(Settings(home=...))`` or ``load_settings(home)``: a home other than
    ``$TETHER_HOME`` holds the same tokens, memory and records, and was readable by commands."""
    from tether.config import Settings

    custom, ws = outside / "custom-home", outside / "ws"
    (custom / "auth").mkdir(parents=True)
    ws.mkdir()
    (custom / "auth" / "local.json").write_text('{"refresh_token": "REFRESH-SECRET"}')
    monkeypatch.setenv("TETHER_HOME", str(outside / "thome"))
    Settings(home=custom)

    said = text_of(call(RunCommand(ShellSettings()), ws, {"command": f"cat {custom}/auth/local.json; echo ran"}))
    assert "REFRESH-SECRET" not in said and "ran" in said


# --- a home's secrets that are not there yet ------------------------------------------------------


@needs_sandbox
def test_a_command_cannot_make_a_missing_secret_folder_and_plant_a_key(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = outside / "home"
    home.mkdir()
    os.chown(home, 65534, 65534) if os.geteuid() == 0 else None  # another user's home, tether as root
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TETHER_HOME", str(outside / "thome"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    plant = (
        "mkdir -p .ssh .local/share/tether; echo 'ssh-ed25519 AAAA attacker' > .ssh/authorized_keys; "
        "echo 'model = \"evil/m\"' > .local/share/tether/config.toml; echo 'machine evil' > .netrc; "
        "mv .ssh .s; echo finished"
    )
    said = text_of(call(RunCommand(ShellSettings()), home, {"command": plant}))

    assert "finished" in said  # the command ran
    assert not (home / ".ssh" / "authorized_keys").exists() and not (home / ".s").exists()
    assert not (home / ".local" / "share" / "tether" / "config.toml").exists()
    assert (home / ".netrc").read_text() == ""
    made = (home / ".ssh").stat()
    assert (made.st_mode & 0o777, made.st_uid) == (0o700, home.stat().st_uid)  # as ssh-keygen makes it, the owner's


def test_write_file_cannot_make_a_missing_secret_folder_in_a_home(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = outside / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TETHER_HOME", str(outside / "thome"))
    tools = {t.name: t for t in (*files.FILE_TOOLS, *files.EDIT_TOOLS)}

    for path in (".ssh/authorized_keys", ".aws/config", f"{home}/.netrc", "x/../.kube/config"):
        with pytest.raises(ToolError, match="where keys and credentials are kept"):
            call(tools["write_file"], home, {"path": path, "content": "planted"})
    assert sorted(p.name for p in home.iterdir()) == []  # not even an empty folder left
    assert call(tools["write_file"], home, {"path": "notes/todo.md", "content": "ok"}).startswith("wrote")


@needs_sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="tether as root in a folder another user owns: needs root")
def test_tether_as_root_runs_commands_in_a_folder_another_user_owns(outside: Path) -> None:
    ws = outside / "project"
    ws.mkdir()
    (ws / "README").write_text("the project\n")
    os.chown(ws, 65534, 65534)
    os.chown(ws / "README", 65534, 65534)

    said = text_of(call(RunCommand(ShellSettings()), ws, {"command": "cat README; touch .tether/skill.md"}))

    assert said.startswith("exit code 1\nthe project\n")  # it ran; .tether stays read-only to it
    assert "touch: cannot touch '.tether/skill.md'" in said
    assert list((ws / ".tether").iterdir()) == [] and (ws / ".tether").stat().st_uid == 65534


# --- a listed writable path swapped for a link ---------------------------------------------------


@needs_sandbox
def test_a_command_cannot_turn_a_listed_writable_path_into_a_link_to_the_outside(outside: Path) -> None:
    ws, elsewhere, cache = outside / "ws", outside / "elsewhere", outside / "pip-cache"
    for folder in (ws / "build" / "out", elsewhere, cache):  # no cache yet: a listed path made later
        folder.mkdir(parents=True)
    (elsewhere / "canary").write_text("as it was\n")
    shell = RunCommand(ShellSettings(writable=("cache", "sub/inner", "out", str(cache))))

    call(shell, ws, {"command": f"ln -s {elsewhere} cache; ln -s {elsewhere} sub; ln -s build/out out"})
    said = text_of(
        call(
            shell,
            ws,
            {"command": f"echo pwned > cache/canary; echo pwned > sub/inner; echo ok > out/x; echo ok > {cache}/y"},
        )
    )

    assert (elsewhere / "canary").read_text() == "as it was\n" and not (elsewhere / "inner").exists()
    assert "cache/canary: Read-only file system" in said
    assert (ws / "build" / "out" / "x").read_text() == "ok\n"  # a link that stays inside: as before
    assert (cache / "y").read_text() == "ok\n"  # a listed folder outside the workspace: as before


# --- web_search: a SearXNG that is down or answers nonsense --------------------------------------


@pytest.fixture
def searxng() -> Iterator[tuple[dict[str, Any], str]]:
    """A loopback server answering /search with ``answer["body"]`` (bytes) and ``answer["status"]``."""
    answer: dict[str, Any] = {"status": 200, "body": b"{}"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(answer["status"])
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer["body"])))
            self.end_headers()
            self.wfile.write(answer["body"])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield answer, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "body",
    [b"<html>Too many requests</html>", b'["a", "b"]', b'{"results": "none"}', b'{"results": {"a": 1}}'],
)
def test_a_search_backend_answering_what_is_not_its_json_is_a_message(
    searxng: tuple[dict[str, Any], str], body: bytes
) -> None:
    answer, url = searxng
    answer["body"] = body
    with pytest.raises(ToolError, match=r"not SearXNG's JSON .*\[tools\.web_search\] url"):
        call(WebSearch(SearxngBackend(url)), Path("."), {"query": "tether"})


def test_odd_results_from_the_search_backend_are_skipped_not_a_crash(searxng: tuple[dict[str, Any], str]) -> None:
    answer, url = searxng
    answer["body"] = json.dumps(
        {"results": ["text", {"title": None, "url": "https://e.org/a", "content": 3}, {"title": "B", "url": "u"}]}
    ).encode()
    found = call(WebSearch(SearxngBackend(url)), Path("."), {"query": "tether"})
    assert found == "1. \n   https://e.org/a\n   \n\n2. B\n   u\n   "


def test_a_search_backend_that_is_down_is_a_message_without_its_password() -> None:
    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = SearxngBackend(f"http://user:hunter2-secret@127.0.0.1:{port}")
    with pytest.raises(ToolError) as raised:
        call(WebSearch(backend), Path("."), {"query": "tether"})
    said = str(raised.value)
    assert f"SearXNG at http://127.0.0.1:{port}) could not be reached" in said
    assert "web_fetch" in said and "hunter2" not in said


def test_a_search_backend_answering_without_end_is_not_read_whole(searxng: tuple[dict[str, Any], str]) -> None:
    """A SearXNG (a public instance, say) answers with 8 MB, or with results whose snippets are
    hundreds of thousands of characters. Was: the whole answer was read into memory and every
    snippet given to the model whole. Now an answer past 5 MB is refused unread and each field is
    cut to 1,000 characters."""
    answer, url = searxng
    answer["body"] = json.dumps({"results": [{"title": "x" * 8_000_000}]}).encode()
    with pytest.raises(ToolError, match="more than 5 MB, so its answer was not read"):
        call(WebSearch(SearxngBackend(url)), Path("."), {"query": "tether"})
    answer["body"] = json.dumps({"results": [{"title": "T", "url": "u", "content": "y" * 300_000}]}).encode()
    found = call(WebSearch(SearxngBackend(url)), Path("."), {"query": "tether"})
    assert found == "1. T\n   u\n   " + "y" * 1_000 + "…"
