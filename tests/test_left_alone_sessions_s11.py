"""Sessions: a result written before its call, a rewrite killed half-way, a relative store path."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tests.conftest import assert_pairing
from tether import Agent, run_sync
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage, text_of
from tether.sessions import INTERRUPTED_TEXT, JsonlSessionStore, repair
from tether.testing import FunctionModel


def _call(call_id: str, name: str = "t") -> AssistantMessage:
    return AssistantMessage(content=(ToolCallPart(id=call_id, name=name, arguments="{}"),))


def _result(call_id: str, text: str, name: str = "t") -> ToolMessage:
    return ToolMessage(call_id=call_id, name=name, content=(TextPart(text=text),))


def test_a_result_written_before_its_call_is_kept_right_after_it(tmp_path: Path) -> None:
    """A session file whose result line came before its call's line (a hand edit, lines out of
    order) lost the real result: it was dropped as an orphan and a placeholder saying the outcome is
    unknown was put after the call, and written back. The result is kept, once, right after its call."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [UserMessage.text("go"), _call("c1"), _result("c1", "42 files")])
    path = store.path("s")
    first, call, res = path.read_text().splitlines(keepends=True)
    path.write_text(first + res + call)  # the result's line moved above its call's
    seen: list[list[str]] = []

    def model(messages: list[object], request: object) -> str:
        seen.append([getattr(m, "call_id", getattr(m, "role", "")) for m in messages])
        return "done"

    fm = FunctionModel(model)
    run_sync(Agent(fm), "and now?", session=store, session_id="s")  # the conversation goes on
    history = store.load("s")
    assert_pairing(history)
    assert [getattr(m, "call_id", m.role) for m in history] == ["user", "assistant", "c1", "user", "assistant"]
    kept = history[2]
    assert isinstance(kept, ToolMessage) and kept.text == "42 files" and kept.status == "ok"
    assert INTERRUPTED_TEXT not in path.read_text()  # no placeholder written back in its place
    assert seen[0] == ["user", "assistant", "c1", "user"]  # what the model was sent: its call, then its result
    assert repair(history) == history


def test_an_early_result_pairs_once_and_only_with_its_own_call() -> None:
    """The early result goes to the first later call with its id and tool, once: a later call that
    reuses the id gets its own result (or a placeholder), a call of another tool with that id is not
    its call, and a result whose call never comes is still dropped."""
    messages = [
        UserMessage.text("go"),
        _result("c1", "early"),
        _result("zz", "no call anywhere"),
        _result("c2", "other tool", name="u"),
        _call("c1"),
        _call("c1"),  # a duplicated line: kept once
        UserMessage.text("again"),
        _call("c2"),
        _call("c1"),  # an id reused by a later turn: not the early result's second home
        _result("c1", "second"),
    ]
    fixed = repair(messages)
    assert_pairing(fixed)
    texts = [(m.call_id, m.text) for m in fixed if isinstance(m, ToolMessage)]
    assert texts == [("c1", "early"), ("c2", INTERRUPTED_TEXT), ("c1", "second")]
    assert repair(fixed) == fixed


# --- a rewrite killed half-way leaves no temporary file behind for ever -------------------------

_STUCK_REWRITE = """
import os, sys
from tether.messages import UserMessage
from tether.sessions import JsonlSessionStore

store = JsonlSessionStore(sys.argv[1], fsync=False)
rename = os.replace

def stuck(src, dst):  # the transcript's temporary file is written; its rename waits for the test's word
    if str(dst).endswith(".jsonl"):
        print("renaming", flush=True)
        sys.stdin.readline()
    rename(src, dst)

os.replace = stuck
store.rewrite("s", [UserMessage.text("compacted")])
print("rewritten", flush=True)
"""


def _stuck_rewrite(root: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _STUCK_REWRITE, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "renaming\n"
    return child


def _temporaries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp"))


def test_a_rewrite_killed_before_its_rename_leaves_no_temporary_file_and_a_live_one_is_left_alone(
    tmp_path: Path,
) -> None:
    """A kill -9 between writing a rewrite's temporary file and renaming it (a compaction, a repair)
    left `.<session>.jsonl.<random>.tmp` in the sessions folder for ever: a whole copy of the
    conversation no command shows or deletes, one more at each such kill. The next open or listing
    removes it; one a live process is still writing is left alone (its rewrite then lands)."""
    root = tmp_path / "sessions"
    store = JsonlSessionStore(root, fsync=False)
    store.append("s", [UserMessage.text("my words"), UserMessage.text("more")])

    live = _stuck_rewrite(root)
    try:
        (written,) = _temporaries(root)
        assert [i.session_id for i in JsonlSessionStore(root, fsync=False).list()] == ["s"]  # never a session
        assert _temporaries(root) == [written]  # its writer holds the session: not touched
        out, _ = live.communicate("go\n", timeout=30)
    finally:
        live.kill()
    assert out == "rewritten\n" and live.returncode == 0
    assert [text_of([m]) for m in store.load("s")] == ["compacted"]

    killed = _stuck_rewrite(root)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    assert len(_temporaries(root)) == 1
    JsonlSessionStore(root, fsync=False)  # the next process to open the folder
    assert _temporaries(root) == []
    assert [text_of([m]) for m in store.load("s")] == ["compacted"]  # the session as it was before the killed rewrite


def test_only_tethers_own_temporary_files_are_removed(tmp_path: Path) -> None:
    """A listing removes the leftovers of every kind of rewrite (transcript, metadata, the count),
    and nothing else: not a link at such a name (nor what it points to), not a file named almost so."""
    root = tmp_path / "sessions"
    store = JsonlSessionStore(root, fsync=False)
    store.append("s.1", [UserMessage.text("hi")])
    hexes = "0123456789abcdef"
    own = [f".s.1.jsonl.{hexes}.tmp", f".s.1.meta.json.{hexes}.tmp", f"..s.1.count.{hexes}.tmp"]
    for name in own:
        (root / name).write_text("cut short")
    target = tmp_path / "elsewhere.txt"
    target.write_text("not tether's")
    (root / f".t.jsonl.{hexes}.tmp").symlink_to(target)
    others = [f".s.1.jsonl.{hexes[:-1]}.tmp", f".s.1.txt.{hexes}.tmp", "notes.tmp"]
    for name in others:
        (root / name).write_text("someone's")
    assert [i.session_id for i in store.list()] == ["s.1"]
    assert _temporaries(root) == sorted([f".t.jsonl.{hexes}.tmp", *others])
    assert target.read_text() == "not tether's"
    (root / f"..s.1.count.{hexes}.tmp").write_text("cut short")
    store.delete("s.1")  # a deletion takes the count's leftover too
    assert _temporaries(root) == sorted([f".t.jsonl.{hexes}.tmp", *others])


def test_a_listing_leaves_a_link_at_a_sessions_lock_alone(tmp_path: Path) -> None:
    """The listing notes a session's count under its lock (so a sweep can tell the note's
    temporary file is live); a link planted at the lock's name is not followed, and the listing
    still lists the session rather than fail."""
    root = tmp_path / "sessions"
    store = JsonlSessionStore(root, fsync=False)
    store.append("a", [UserMessage.text("hi")])
    target = tmp_path / "elsewhere"
    target.write_text("not tether's")
    (root / ".a.lock").unlink()
    (root / ".a.lock").symlink_to(target)
    assert [(i.session_id, i.messages) for i in store.list()] == [("a", 1)]
    assert target.read_text() == "not tether's" and (root / ".a.lock").is_symlink()


# --- a relative session store path is the same store from every folder ---------------------------


@pytest.mark.parametrize("source", ["config.toml", "TETHER_SESSION_STORE"])
def test_a_relative_session_store_is_under_tether_home_from_every_folder(
    source: str, tmp_path: Path, tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`session_store = "jsonl:convs"` (or TETHER_SESSION_STORE=sqlite:convs.db) was taken relative
    to the folder tether ran in: the same configuration, run from another folder, silently opened
    another, empty store, and the conversation seemed lost. It is under $TETHER_HOME, as every
    relative path of config.toml is (output_schema, skills paths), for the CLI and the server alike."""
    from tether.assembly import session_store
    from tether.config import load_settings

    tether_home.mkdir(parents=True)
    if source == "config.toml":
        (tether_home / "config.toml").write_text('session_store = "jsonl:convs"\n')
    else:
        monkeypatch.setenv("TETHER_SESSION_STORE", "sqlite:convs.db")
    first, second, workspace = tmp_path / "first", tmp_path / "second", tmp_path / "ws"
    for folder in (first, second, workspace):
        folder.mkdir()
    monkeypatch.chdir(first)
    code, _, err = run_main(
        "run", "--model", "scripted/hello", "--cwd", str(workspace), "--session", "s1", "hi", capsys=capsys
    )
    assert code == 0, err
    monkeypatch.chdir(second)
    code, out, err = run_main("sessions", "list", "--json", capsys=capsys)
    assert code == 0 and "s1" in out, err
    assert [i.session_id for i in session_store(None, load_settings()).list()] == ["s1"]  # the server's door
    assert (tether_home / ("convs" if source == "config.toml" else "convs.db")).exists()
    assert [p.name for f in (first, second) for p in f.iterdir()] == []  # nothing in the folders it ran in


def test_a_relative_session_store_flag_is_where_the_command_was_typed_also_on_resume(
    tmp_path: Path, tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--session-store jsonl:rel` is relative to the folder the command is typed in; the run
    recorded it as typed, so `tether resume` from another folder continued the conversation in
    another, empty store there. It is made absolute at once."""
    first, second, workspace = tmp_path / "first", tmp_path / "second", tmp_path / "ws"
    for folder in (first, second, workspace):
        folder.mkdir()
    monkeypatch.chdir(first)
    argv = [
        "run",
        "--model",
        "scripted/plan",
        "--cwd",
        str(workspace),
        "--session",
        "s1",
        "--session-store",
        "jsonl:rel",
    ]
    code, out, err = run_main(*argv, "--max-turns", "1", "--json", "go", capsys=capsys)
    assert json.loads(out)["status"] == "max_turns_exceeded", err
    before = len(JsonlSessionStore(first / "rel").load("s1"))
    monkeypatch.chdir(second)
    code, out, err = run_main("resume", json.loads(out)["run_id"], "--max-turns", "5", capsys=capsys)
    assert code == 0, err
    assert not (second / "rel").exists()
    assert len(JsonlSessionStore(first / "rel").load("s1")) > before  # the same conversation went on


def test_sessions_left_in_the_folder_a_relative_store_used_to_mean_are_named(
    tmp_path: Path,
    tether_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Sessions written before under the folder tether ran in are not silently left out: every
    command that opens the store says where they are and what to do, until they are moved."""
    tether_home.mkdir(parents=True)
    (tether_home / "config.toml").write_text('session_store = "jsonl:convs"\n')
    monkeypatch.chdir(tmp_path)
    JsonlSessionStore(tmp_path / "convs").append("old", [UserMessage.text("before")])
    for _ in range(2):
        caplog.clear()
        code, out, err = run_main("sessions", "list", capsys=capsys)
        assert code == 0 and "old" not in out, err
        said = caplog.text
        assert f"{tmp_path / 'convs'} in the folder tether runs in" in said and str(tether_home / "convs") in said
    (tmp_path / "convs").rename(tether_home / "convs")
    caplog.clear()
    code, out, err = run_main("sessions", "list", capsys=capsys)
    assert code == 0 and "old" in out and "folder tether runs in" not in caplog.text
