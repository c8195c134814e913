"""Sessions and cross-session memory attacked from outside, through the real ``tether`` command:
session files damaged by hand or by a killed process, both session stores, memory written by many
processes at once up to its limit, and text that is not UTF-8. Every refusal is one line with an
exit code from docs/cli.md, never a traceback; nothing that was readable is lost."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether.memory import Memory, MemoryRefused

HELLO = "Hello! I am the scripted model; I call no tools in this scenario."


def _env(home: Path) -> dict[str, str]:
    drop = ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE", "TETHER_MODEL")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "TETHER_HOME": str(home)}


def _tether(home: Path, *args: str | bytes, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "tether", *args],
        env=_env(home),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out


def _said(home: Path, cwd: Path, session: str, prompt: str, *store: str) -> None:
    out = _tether(home, "run", "--model", "scripted/hello", "--cwd", str(cwd), "--session", session, *store, prompt)
    assert out.returncode == 0, out.stderr


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


# -- damaged session files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [b"{not json at all", b'{"role": "user", "content": [{"type": "text", "text": "caf\xe9"}]}', b"null"],
    ids=["garbled", "latin-1 edit", "not a message"],
)
def test_a_line_no_message_is_read_from_is_kept_beside_the_session_when_a_load_drops_it(
    home: Path, cwd: Path, garbage: bytes
) -> None:
    """A message edited by hand into something unreadable was deleted for good by the next load
    (even `tether sessions show`) with no word and no copy. Now its bytes stay beside the session,
    the readable messages are all there, and the session goes on."""
    _said(home, cwd, "s", "first")
    path = home / "sessions" / "s.jsonl"
    first, second = path.read_bytes().splitlines()
    damaged = first + b"\n" + garbage + b"\n" + second + b"\n"
    path.write_bytes(damaged)

    shown = _tether(home, "sessions", "show", "s")
    assert shown.returncode == 0, shown.stderr
    assert "first" in shown.stdout and HELLO in shown.stdout
    copies = list(path.parent.glob("s.jsonl.damaged-*"))
    assert [c.read_bytes() for c in copies] == [damaged]  # the original, byte for byte
    assert oct(copies[0].stat().st_mode & 0o777) == "0o600"

    _said(home, cwd, "s", "second")
    assert [m["role"] for m in _lines(path)] == ["user", "assistant", "user", "assistant"]
    listed = _tether(home, "sessions", "list", "--json")
    assert [s["session_id"] for s in json.loads(listed.stdout)] == ["s"]  # the copy is no session
    assert len(list(path.parent.glob("s.jsonl.damaged-*"))) == 1  # a clean file makes no more copies


def test_a_torn_last_line_is_dropped_without_a_copy_and_the_session_goes_on(home: Path, cwd: Path) -> None:
    _said(home, cwd, "s", "first")
    path = home / "sessions" / "s.jsonl"
    with path.open("ab") as f:
        f.write(b'{"role":"user","content":[{"type":"te')
    _said(home, cwd, "s", "second")
    assert [m["role"] for m in _lines(path)] == ["user", "assistant", "user", "assistant"]
    assert not list(path.parent.glob("*.damaged-*"))  # an expected crash leaves no litter


@pytest.mark.parametrize("kind", ["empty", "huge line", "only garbage"])
def test_a_damaged_session_file_lists_shows_and_continues(home: Path, cwd: Path, kind: str) -> None:
    _said(home, cwd, "s", "first")
    path = home / "sessions" / "s.jsonl"
    big = "x" * 3_000_000
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "huge line":
        path.write_text(json.dumps({"role": "user", "content": [{"type": "text", "text": big}]}) + "\n")
    else:
        path.write_bytes(b"\xff\xfe\x00garbage\n[[[[[[[[\n")
    assert _tether(home, "sessions", "list").returncode == 0
    shown = _tether(home, "sessions", "show", "s")
    assert shown.returncode == 0, shown.stderr
    _said(home, cwd, "s", "again")
    texts = [m["content"][0]["text"] for m in _lines(path)]  # type: ignore[index]
    assert texts[-2:] == ["again", HELLO]
    assert texts[:-2] == ([big] if kind == "huge line" else [])


def test_a_folder_at_the_session_file_is_a_clear_usage_error(home: Path, cwd: Path) -> None:
    _said(home, cwd, "s", "first")
    path = home / "sessions" / "s.jsonl"
    path.unlink()
    path.mkdir()
    out = _tether(home, "run", "--model", "scripted/hello", "--cwd", str(cwd), "--session", "s", "again")
    assert out.returncode == 2
    assert f"{path} is a folder" in out.stderr and "remove it" in out.stderr
    assert _tether(home, "sessions", "list").returncode == 0


def test_the_listing_leaves_out_files_whose_names_no_command_can_address(home: Path, cwd: Path) -> None:
    """`sessions list` showed `a b` and a name that is not UTF-8, which `show` and `delete` refuse."""
    _said(home, cwd, "s", "first")
    (home / "sessions" / "a b.jsonl").write_bytes(b"")
    os.close(os.open(os.fsencode(home / "sessions") + b"/\xff.jsonl", os.O_CREAT | os.O_WRONLY, 0o600))
    listed = _tether(home, "sessions", "list", "--json")
    assert [s["session_id"] for s in json.loads(listed.stdout)] == ["s"]
    assert _tether(home, "sessions", "list").stdout.split() == ["s", "2", "messages"]


def test_a_process_killed_mid_run_leaves_a_session_that_says_so_and_goes_on(home: Path, cwd: Path) -> None:
    """kill -9 while a tool runs: the call stays, its result is the placeholder marked interrupted,
    and the next run in the session continues after it."""
    slow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tether",
            "run",
            "--model",
            "scripted/slow",
            "--cwd",
            str(cwd),
            "--session",
            "s",
            "scan",
        ],
        env=_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    path = home / "sessions" / "s.jsonl"
    deadline = time.monotonic() + 30  # a hang guard, not a measure
    while not (path.exists() and b"tool_call" in path.read_bytes()):
        assert time.monotonic() < deadline and slow.poll() is None
        time.sleep(0.05)
    os.kill(slow.pid, signal.SIGKILL)
    slow.wait(timeout=30)

    shown = _tether(home, "sessions", "show", "s")
    assert shown.returncode == 0 and "interrupted" in shown.stdout
    _said(home, cwd, "s", "and now?")
    lines = _lines(path)
    assert [m["role"] for m in lines] == ["user", "assistant", "tool", "user", "assistant"]
    assert lines[2]["status"] == "interrupted"


def test_the_sqlite_store_drops_a_damaged_row_and_goes_on(home: Path, cwd: Path) -> None:
    sqlite = ("--session-store", "sqlite")
    _said(home, cwd, "s", "first", *sqlite)
    with sqlite3.connect(home / "sessions.db") as db:
        db.execute("UPDATE messages SET body = '{torn' WHERE seq = 0")
    shown = _tether(home, "sessions", "show", "s", *sqlite)
    assert shown.returncode == 0 and HELLO in shown.stdout
    _said(home, cwd, "s", "again", *sqlite)
    exported = _tether(home, "sessions", "export", "s", *sqlite)
    assert [json.loads(line)["role"] for line in exported.stdout.splitlines()] == ["assistant", "user", "assistant"]


def test_a_database_that_is_not_one_is_a_clear_usage_error(home: Path, cwd: Path) -> None:
    home.mkdir()
    (home / "sessions.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    out = _tether(
        home, "run", "--model", "scripted/hello", "--cwd", str(cwd), "--session", "s", "--session-store", "sqlite", "hi"
    )
    assert out.returncode == 2
    assert "sessions.db" in out.stderr and "not a database" in out.stderr


# -- memory ------------------------------------------------------------------------------------


def test_a_memory_note_that_is_not_utf8_is_refused_in_one_line(home: Path) -> None:
    """`tether memory add $'\\xff'` ended in a UnicodeEncodeError traceback from the scan (exit 1)."""
    _tether(home, "memory", "add", "Prefers metric units.")
    notes = home / "memory" / "notes.md"
    before = notes.read_bytes()
    out = _tether(home, "memory", "add", os.fsencode("Prefers ") + b"\xff" + os.fsencode(" tea."))
    assert out.returncode == 2
    assert out.stderr.startswith("tether: Not saved:") and "not valid UTF-8" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert notes.read_bytes() == before


@pytest.mark.parametrize("action", ["add", "replace"])
def test_the_memory_tool_refuses_a_lone_surrogate_from_json(tmp_path: Path, action: str) -> None:
    """A model's tool call may carry "\\udcff" in its JSON: a refusal with a rule, not a crash."""
    memory = Memory.open(tmp_path)
    memory.add("notes", "Deploys on Tuesdays.")
    text = json.loads('"Deploys on \\udcff days."')
    with pytest.raises(MemoryRefused) as refused:
        memory.add("notes", text) if action == "add" else memory.replace("notes", "Tuesdays", text)
    assert refused.value.rule == "encoding"
    assert memory.entries("notes") == ["Deploys on Tuesdays."]


def test_ten_memory_adds_at_once_near_the_limit_keep_each_note_once_or_refuse_it(home: Path) -> None:
    """10 `tether memory add` processes racing for a store with room for 4 of their notes: exactly 4
    are saved once each, the other 6 are refused with the limit's message (exit 2), nothing else."""
    notes = [f"Project fact number {i:02d} is recorded." for i in range(10)]
    home.mkdir()
    (home / "config.toml").write_text(f"[memory]\nnotes_limit = {len(notes[0]) * 4 + 3}\n")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tether", "memory", "add", note],
            env=_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for note in notes
    ]
    results = [(p.wait(timeout=60), p.stderr.read() if p.stderr else "") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    assert all("Traceback" not in err for _, err in results)
    saved = [n for n, (code, _) in zip(notes, results, strict=True) if code == 0]
    refused = [err for code, err in results if code != 0]
    assert len(saved) == 4 and len(refused) == 6
    assert all(code in (0, 2) for code, _ in results)
    assert all("Not saved" in err and "Consolidate first" in err for err in refused)
    text = (home / "memory" / "notes.md").read_text()
    assert sorted(line[2:] for line in text.splitlines()) == sorted(saved)


def test_memory_commands_on_a_damaged_file_keep_its_bytes(home: Path) -> None:
    notes = home / "memory" / "notes.md"
    notes.parent.mkdir(parents=True)
    original = b"- ok\n- bad \xff\xfe byte\n" + b"x" * 2_300 + b"\n"
    notes.write_bytes(original)
    shown = _tether(home, "memory", "show", "--notes")
    assert shown.returncode == 0 and "bad \ufffd\ufffd byte" in shown.stdout
    refused = _tether(home, "memory", "add", "One more.")  # the hand-written line is past the limit
    assert refused.returncode == 2 and "Consolidate first" in refused.stderr
    assert notes.read_bytes() == original
    cleared = _tether(home, "memory", "clear", "--notes", "--yes")
    assert cleared.returncode == 0 and "Cleared notes (3 entries)" in cleared.stdout
    # a clear asked for the bytes to go: no copy of them is kept (docs/memory.md; round five)
    assert not list(notes.parent.glob("notes.md.damaged-*"))
    assert notes.read_bytes() == b""


def test_sessions_show_never_prints_a_terminal_escape_from_a_tool_result(home: Path) -> None:
    """A tool's result (a web page, a file) went to the terminal raw: an OSC 52 sequence in it
    wrote the clipboard, ``ESC [2J`` cleared the screen."""
    from tether.messages import AssistantMessage, ToolCallPart, ToolMessage, UserMessage, dump_message

    messages = [
        UserMessage.text("Read page.html"),
        AssistantMessage(content=(ToolCallPart(id="c1", name="read_file", arguments='{"path": "page.html"}'),)),
        ToolMessage.model_validate(
            {
                "call_id": "c1",
                "name": "read_file",
                "content": [{"type": "text", "text": "<p>\x1b]52;c;cm0gLXJmIH4=\x07hi\x1b[2J\u202eevil\x00</p>"}],
            }
        ),
    ]
    (home / "sessions").mkdir(parents=True)
    (home / "sessions" / "s.jsonl").write_text("".join(dump_message(m) + "\n" for m in messages))
    for full in ([], ["--full"]):
        shown = _tether(home, "sessions", "show", "s", *full)
        assert shown.returncode == 0, shown.stderr
        assert not any(c in shown.stdout for c in "\x1b\x07\x00\u202e")
        assert "\\x1b]52;c;cm0gLXJmIH4=\\x07hi\\x1b[2J\\u202eevil\\x00" in shown.stdout
    exported = _tether(home, "sessions", "export", "s")  # JSON lines: escaped by JSON itself
    assert "\x1b" not in exported.stdout and len(exported.stdout.splitlines()) == 3


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_a_file_where_the_sessions_folder_should_be_is_named(home: Path, cwd: Path, store: str) -> None:
    """It said `...: File exists.`, naming nothing."""
    home.mkdir()
    blocker = home / "sessions"
    blocker.write_text("x")
    spec = "jsonl" if store == "jsonl" else f"sqlite:{blocker / 'db.sqlite'}"
    for args in (("sessions", "list"), ("run", "--model", "scripted/hello", "--cwd", str(cwd), "--session", "s", "hi")):
        out = _tether(home, *args, "--session-store", spec)
        assert out.returncode == 2
        assert f"{blocker} is a file, not a folder: move it away" in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert blocker.read_text() == "x"


def test_a_file_where_the_memory_folder_should_be_is_named(home: Path) -> None:
    """It said `.../memory/profile.md: not a regular file (...): move it away`: the wrong name."""
    home.mkdir()
    (home / "memory").write_text("x")
    for args in (("show",), ("add", "Prefers tea."), ("clear", "--yes")):
        out = _tether(home, "memory", *args)
        assert out.returncode == 2
        assert f"{home / 'memory'} is a file, not a folder: move it away" in out.stderr
        assert "profile.md: not a regular file" not in out.stderr


def test_a_session_damaged_twice_in_one_second_keeps_both_copies(tmp_path: Path) -> None:
    """The copy was named by the second and the pid: the second repair in one second crashed on
    ``FileExistsError`` (a torn line, then an append, makes a whole damaged line)."""
    from tether.messages import UserMessage
    from tether.sessions import JsonlSessionStore

    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    path = store.path("s")
    for n in range(3):
        store.append("s", [UserMessage.text(f"message {n}")])
        with path.open("ab") as f:
            f.write(b"{torn\n")
        assert [m.content[0].text for m in store.load("s")] == [f"message {i}" for i in range(n + 1)]  # type: ignore[union-attr]
    assert len(list(path.parent.glob("s.jsonl.damaged-*"))) == 3
