"""Files planted in a run's folder: a link, a named pipe or a folder put where tether keeps a run's
header slots (``state.a.json``, ``state.b.json``) or its transcript (``messages.jsonl``).

A user relies on three things: a link is never followed, for a read or a write, so a file outside
tether's home is never read as a run nor overwritten by a save; nothing planted makes a load, a save
or the listing of runs wait (a named pipe opened for reading waits for a writer, and for writing for
a reader); and the run that holds one loads, or saves, as a clear StoreError that names the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.planted import KINDS, outcome, plant
from tether import RunState, RunStore
from tether.errors import StoreError
from tether.messages import AssistantMessage, TextPart, UserMessage

NOTES = b"the user's own notes, not tether's\n" * 40


def saved_run(root: Path, run_id: str = "run_planted") -> RunState:
    """A run saved once, durably, as a finished `tether run` leaves it."""
    state = RunState(run_id=run_id)
    state.messages.append(UserMessage.text("tidy the logs"))
    state.messages.append(AssistantMessage(content=(TextPart(text="done"),)))
    store = RunStore(root)
    store.save(state)
    store.close()
    return state


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["state.b.json", "messages.jsonl"])
def test_a_save_refuses_a_file_planted_where_it_writes_and_leaves_the_file_outside_untouched(
    tmp_path: Path, name: str, kind: str
) -> None:
    """A resumed run's next save writes the header slot the last durable commit is not in
    (state.b.json after one save) and appends to the transcript: neither is written through a link,
    waited on, or taken for the run's own file."""
    root, outside = tmp_path / "runs", tmp_path / "notes.txt"
    outside.write_bytes(NOTES)
    saved_run(root)
    store = RunStore(root)  # another process resumes the run
    state = store.load("run_planted")
    planted = root / "run_planted" / name
    plant(planted, kind, outside)
    state.messages.append(UserMessage.text("and the old ones too"))

    error = outcome(lambda: store.save(state), planted)
    store.close()

    assert isinstance(error, StoreError), error
    assert name in str(error) and "Remove it" in str(error)
    assert outside.read_bytes() == NOTES  # not a byte of the header or the transcript went there
    assert not outside.with_name("made-through-the-link.txt").exists()
    assert planted.is_symlink() == kind.endswith("link")  # left as it was found, for the user to look at


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["state.a.json", "messages.jsonl"])
def test_a_run_whose_file_was_replaced_loads_as_a_clear_error_at_once(tmp_path: Path, name: str, kind: str) -> None:
    """state.a.json holds the run's only commit, messages.jsonl its transcript: read through a link,
    the run would be whatever the link points to; opened as a named pipe, the load (and the server
    loop that called it) would wait for a writer forever."""
    root, outside = tmp_path / "runs", tmp_path / "notes.txt"
    outside.write_bytes(NOTES)
    saved_run(root)
    planted = root / "run_planted" / name
    plant(planted, kind, outside)
    store = RunStore(root)

    error = outcome(lambda: store.load("run_planted"), planted)

    assert isinstance(error, StoreError), error
    assert str(planted) in str(error) and "delete the run" in str(error)
    assert store.exists("run_planted")  # there, damaged: `tether runs` shows it and load says why
    assert outside.read_bytes() == NOTES


def test_listing_runs_skips_one_with_a_named_pipe_for_a_header_and_never_waits_on_it(tmp_path: Path) -> None:
    """GET /v1/runs and `tether runs` list every run's header: a named pipe planted as one run's
    header must not stall the listing (on the server, its whole HTTP loop)."""
    root = tmp_path / "runs"
    saved_run(root, "run_planted")
    saved_run(root, "run_fine")
    planted = root / "run_planted" / "state.a.json"
    plant(planted, "named_pipe", tmp_path / "unused.txt")
    listed: list[dict[str, Any]] = []

    error = outcome(lambda: listed.extend(RunStore(root).list()), planted)

    assert error is None
    assert [row["run_id"] for row in listed] == ["run_fine"]


def test_a_run_folder_replaced_by_a_link_is_neither_locked_nor_written_through(tmp_path: Path) -> None:
    """O_NOFOLLOW guards a path's last name only: a link put at the run's folder would lead every
    save into the folder it points to. Resuming such a run (its lock) and saving it are refused."""
    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    state = saved_run(root)
    elsewhere.mkdir()
    (elsewhere / "state.a.json").write_bytes(NOTES)
    folder = root / "run_planted"
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    folder.symlink_to(elsewhere, target_is_directory=True)
    store = RunStore(root)
    with pytest.raises(StoreError, match="symbolic link|Remove it"), store.lock("run_planted"):
        pass
    state.messages.append(UserMessage.text("and the old ones too"))
    with pytest.raises(StoreError, match="Remove it"):
        store.save(state)
    store.close()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["state.a.json"]
    assert (elsewhere / "state.a.json").read_bytes() == NOTES


def test_a_run_folder_replaced_by_a_link_is_not_read_through_either(tmp_path: Path) -> None:
    """Loading or listing the run does not show whatever the link points to as the run."""
    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    saved_run(root, "run_moved")
    (root / "run_moved").rename(elsewhere)  # a whole run, moved out and linked back in
    (root / "run_moved").symlink_to(elsewhere, target_is_directory=True)
    saved_run(root, "run_fine")
    store = RunStore(root)
    with pytest.raises(StoreError, match="Remove it"):
        store.load("run_moved")
    assert [h["run_id"] for h in store.list()] == ["run_fine"]
    store.close()
