"""Memory attacked a fourth time, from the files and the command line: a credential or a control
character written into a memory file by hand (the writes refuse both; the prompt, the session and
the memory tool took them all the same), ``tether memory show --json`` printing C1 controls and
direction overrides raw, and project notes that a moved project no longer finds. (Round 3,
test_attack_memory_round3.py, took a hostile model driving the tool and entries past the scan.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main
from tests.memory.conftest import Stores
from tests.memory.test_tool import agent, call, scripted, stream, tool_replies
from tether import RunState, run_sync
from tether.memory import Memory
from tether.sessions import JsonlSessionStore

quiet_env = cli.quiet_env

KEY = "sk-proj-4fGh7Jk9LmN0pQ2rS5tU8vW1xY3zA6bC9dE2fG5h"  # the shape only: no such key


@pytest.mark.parametrize(
    "entry",
    [f"Deploy key for staging: {KEY}", "Likes \x1b]0;owned\x07 short answers.", "Tea \x9b31m with milk."],
    ids=["credential", "escape", "c1"],
)
def test_an_entry_written_by_hand_that_a_write_refuses_is_withheld_from_the_prompt(stores: Stores, entry: str) -> None:
    """A write refuses a credential ("it would reach every future system prompt and the traces")
    and a control character; written into the file by hand, both went into every session's
    prompt (so to the provider, and into the session saved on disk). They are kept in the file,
    withheld from the prompt like an entry the scan refuses, and ``withheld`` says why."""
    mem = stores.open()
    stores.write_by_hand(mem, "notes", f"- Deploy on Tuesdays.\n- {entry}\n")
    block = mem.prompt_block()
    assert "- Deploy on Tuesdays." in block and "(1 entry withheld" in block
    assert entry not in block and KEY not in block and "\x1b" not in block and "\x9b" not in block
    finding = mem.withheld(entry)
    assert finding is not None and finding.rule == ("secret" if KEY in entry else "control")
    assert KEY not in finding.message
    assert mem.withheld("Deploy on Tuesdays.") is None
    assert mem.entries("notes") == ["Deploy on Tuesdays.", entry]  # nothing lost


def test_a_key_written_by_hand_reaches_neither_the_session_nor_the_tools_answers(home: Path, tmp_path: Path) -> None:
    folder = home / "memory"
    folder.mkdir(parents=True)
    (folder / "notes.md").write_text(f"- Deploy on Tuesdays.\n- Staging key {KEY}\n", encoding="utf-8")
    sessions = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    run_sync(agent(scripted("Hi."), home), "Hi", session=sessions, session_id="s1")
    saved = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "sessions").iterdir())
    assert "Deploy on Tuesdays." in saved and KEY not in saved
    state = RunState()
    model = scripted(
        call("l1", "memory", {"action": "list"}),
        call("r1", "memory", {"action": "remove", "store": "notes", "match": "e"}),
        "Listed.",
    )
    stream(agent(model, home), "list", state=state)
    listed, ambiguous = tool_replies(state)
    assert "Deploy on Tuesdays." in listed.text and KEY not in listed.text
    assert "Be more specific" in ambiguous.text and KEY not in ambiguous.text


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_memory_show_marks_a_key_written_by_hand_and_its_json_escapes_c1_and_overrides(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tether memory show --json`` printed U+009B (a terminal's CSI in 8-bit mode) and U+202E
    (which reorders what follows) raw, where ``tether kb search --json`` escapes them; JSON
    already escaped the C0 ones."""
    folder = quiet_env / "memory"
    folder.mkdir(parents=True)
    entries = ["Tea \x9b31m with milk.", "Named \u202etxt.exe file.", f"Staging key {KEY}"]
    (folder / "notes.md").write_text("".join(f"- {e}\n" for e in entries), encoding="utf-8")
    code, out, err = run_main("memory", "show", "--notes", "--json", capsys=capsys)
    assert code == 0, err
    assert "\x9b" not in out and "\u202e" not in out and "\\u009b" in out and "\\u202e" in out
    (notes,) = json.loads(out)
    assert [e["text"] for e in notes["entries"]] == entries  # the same text, escaped
    assert all(e["withheld"] for e in notes["entries"])
    assert "it holds what looks like an API key" in notes["entries"][2]["withheld"]
    code, out, err = run_main("memory", "show", "--notes", capsys=capsys)
    assert code == 0 and f"- Staging key {KEY}\n  ! withheld from the agent: it holds what looks like" in out


def test_memory_show_says_where_the_notes_of_a_moved_project_are(
    quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Project notes are kept by the folder's real path (docs/memory.md): a project moved to
    another folder started with none, and `tether memory show` said only "(empty)". It now says
    why, and names the notes of the folder of the same name, with how to keep them."""
    old = tmp_path / "old" / "shop"
    old.mkdir(parents=True)
    code, _, err = run_main(
        "memory", "add", "We deploy on Tuesdays.", "--scope", "project", "--cwd", str(old), capsys=capsys
    )
    assert code == 0, err
    kept = Memory.open(quiet_env, scope="project", project=old).stores["notes"].path
    new = tmp_path / "new" / "shop"
    new.parent.mkdir()
    old.rename(new)
    code, out, err = run_main("memory", "show", "--scope", "project", "--cwd", str(new), capsys=capsys)
    assert code == 0 and "(empty)" in out
    assert "project notes are kept by the folder's path, so a project moved or renamed starts without them" in err
    assert f"notes of another folder named 'shop': {kept}; move that file to " in err
    here = Memory.open(quiet_env, scope="project", project=new).stores["notes"].path
    assert str(here) in err
    here.parent.mkdir(parents=True)
    kept.rename(here)  # as the message says
    code, out, err = run_main("memory", "show", "--scope", "project", "--cwd", str(new), capsys=capsys)
    assert code == 0 and "- We deploy on Tuesdays." in out and err == ""
    code, out, err = run_main("memory", "show", capsys=capsys)  # user scope: nothing to say
    assert code == 0 and err == ""


def test_removing_a_key_written_by_hand_does_not_put_it_in_the_event_or_the_trace(home: Path, tmp_path: Path) -> None:
    """The model may remove an entry it cannot see (the user asks it to forget the staging key);
    the memory_write event, which the stream's readers and the trace file get, carried the whole
    removed entry, key and all."""
    from tether import JsonlTracer
    from tether.events import MemoryWrite

    folder = home / "memory"
    folder.mkdir(parents=True)
    (folder / "notes.md").write_text(f"- Deploy on Tuesdays.\n- Staging key {KEY}\n", encoding="utf-8")
    model = scripted(call("r1", "memory", {"action": "remove", "store": "notes", "match": "Staging key"}), "Done.")
    events = stream(agent(model, home), "Forget the staging key.", tracer=JsonlTracer(tmp_path / "traces"))
    (write,) = [e for e in events if isinstance(e, MemoryWrite)]
    assert write.action == "remove" and write.text == "(an entry withheld from the assistant)"
    assert Memory.open(home).entries("notes") == ["Deploy on Tuesdays."]
    traced = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "traces").iterdir())
    assert "memory_write" in traced and KEY not in traced
