"""The JSONL session store when someone who can write into tether's home puts something else where
a session's files go: a named pipe, a symbolic link (to a file outside, or to nothing), a folder.

What a user relies on: nothing put there hangs the process (a server answers its other sessions),
no link is read or written through (a file outside the home is never changed or created), and the
error names the file and says what to do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.planted import pipe_at, promptly
from tether.errors import ConfigError
from tether.messages import UserMessage
from tether.sessions import JsonlSessionStore

SECRET = b"the user's own file, outside tether's home\n"


@pytest.fixture
def store(tmp_path: Path) -> JsonlSessionStore:
    return JsonlSessionStore(tmp_path / "sessions")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file of the user's, outside the session folder, that a planted link points to."""
    victim = tmp_path / "outside" / "precious.txt"
    victim.parent.mkdir()
    victim.write_bytes(SECRET)
    return victim


def lock_of(store: JsonlSessionStore, session_id: str) -> Path:
    return store.root / f".{session_id}.lock"


def hello(text: str = "hello") -> list[UserMessage]:
    return [UserMessage.text(text)]


def texts(messages: list[Any]) -> list[str]:
    return [m.content[0].text for m in messages]


# -- a named pipe where a session's file goes ---------------------------------------------------


@pytest.mark.parametrize("call", ["load", "append", "delete", "rewrite", "save_meta"])
def test_a_pipe_at_the_lock_is_an_error_at_once_not_a_hang(store: JsonlSessionStore, call: str) -> None:
    store.append("s", hello())
    lock = pipe_at(lock_of(store, "s"))
    calls: dict[str, Callable[[], Any]] = {
        "load": lambda: store.load("s"),
        "append": lambda: store.append("s", hello("more")),
        "delete": lambda: store.delete("s"),  # the server deletes on its HTTP loop
        "rewrite": lambda: store.rewrite("s", hello("again")),
        "save_meta": lambda: store.save_meta("s", {"k": 1}),
    }
    with pytest.raises(ConfigError, match=r"\.s\.lock is a named pipe.*remove it"):
        promptly(calls[call], lock)
    lock.unlink()
    assert texts(store.load("s")) == ["hello"]  # refused before anything was changed


def test_a_pipe_at_the_transcript_fails_the_load_and_the_append_at_once(store: JsonlSessionStore) -> None:
    transcript = pipe_at(store.path("s"))
    with pytest.raises(ConfigError, match=r"s\.jsonl is a named pipe.*remove it"):
        promptly(lambda: store.load("s"), transcript)
    with pytest.raises(ConfigError, match=r"s\.jsonl is a named pipe"):
        promptly(lambda: store.append("s", hello()), transcript)
    store.append("other", hello())  # another session is not held up
    assert texts(store.load("other")) == ["hello"]


def test_a_pipe_at_the_transcript_fails_the_sync_of_unsynced_appends(store: JsonlSessionStore) -> None:
    store.append("s", hello(), durable=False)  # a run mirrors its transcript, synced later
    transcript = pipe_at(store.path("s"))
    with pytest.raises(ConfigError, match=r"s\.jsonl is a named pipe"):
        promptly(lambda: store.sync("s"), transcript)


def test_a_pipe_at_the_metadata_counts_as_empty_and_is_replaced(store: JsonlSessionStore) -> None:
    meta = pipe_at(store.root / "s.meta.json")
    assert promptly(lambda: store.load_meta("s"), meta) == {}  # as a file that cannot be read
    store.save_meta("s", {"prompt_blocks": {}})
    assert store.load_meta("s") == {"prompt_blocks": {}}


def test_the_listing_leaves_out_a_pipe_and_shows_the_real_sessions(store: JsonlSessionStore) -> None:
    store.append("real", hello())
    pipe = pipe_at(store.root / "planted.jsonl")
    listed = promptly(store.list, pipe)
    assert [(info.session_id, info.messages) for info in listed] == [("real", 1)]


# -- a symbolic link where a session's file goes ------------------------------------------------


def test_a_link_at_the_transcript_is_refused_and_its_target_left_alone(store: JsonlSessionStore, outside: Path) -> None:
    store.path("s").symlink_to(outside)
    with pytest.raises(ConfigError, match=r"s\.jsonl is a symbolic link.*remove it"):
        store.load("s")
    with pytest.raises(ConfigError, match=r"s\.jsonl is a symbolic link"):
        store.append("s", hello("secret conversation"))
    assert outside.read_bytes() == SECRET
    assert store.list() == []  # not listed as a session either
    store.delete("s")  # removes the link, not the file it points to
    assert not store.path("s").is_symlink() and outside.read_bytes() == SECRET


def test_a_dangling_link_at_the_transcript_creates_nothing_where_it_points(
    store: JsonlSessionStore, tmp_path: Path
) -> None:
    target = tmp_path / "outside" / "made-through-the-link.jsonl"
    target.parent.mkdir()
    store.path("s").symlink_to(target)
    with pytest.raises(ConfigError, match=r"s\.jsonl is a symbolic link"):
        store.load("s")
    with pytest.raises(ConfigError, match=r"s\.jsonl is a symbolic link"):
        store.append("s", hello("secret conversation"))
    assert not target.exists()


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_at_the_lock_is_refused_and_nothing_is_made_or_changed_outside(
    store: JsonlSessionStore, outside: Path, tmp_path: Path, dangling: bool
) -> None:
    target = tmp_path / "outside" / "made-through-the-lock" if dangling else outside
    lock_of(store, "s").symlink_to(target)
    with pytest.raises(ConfigError, match=r"\.s\.lock is a symbolic link.*remove it"):
        store.load("s")
    with pytest.raises(ConfigError, match=r"\.s\.lock is a symbolic link"):
        store.append("s", hello())
    assert not (tmp_path / "outside" / "made-through-the-lock").exists()
    assert outside.read_bytes() == SECRET


def test_a_link_at_the_metadata_is_not_read_through_and_is_replaced(store: JsonlSessionStore, outside: Path) -> None:
    outside.write_bytes(b'{"prompt_blocks": {"memory": "read from outside the home"}}')
    before = outside.read_bytes()
    meta = store.root / "s.meta.json"
    meta.symlink_to(outside)
    assert store.load_meta("s") == {}  # as a file that cannot be read
    store.save_meta("s", {"prompt_blocks": {}})
    assert not meta.is_symlink() and store.load_meta("s") == {"prompt_blocks": {}}
    assert outside.read_bytes() == before


def test_the_listing_does_not_read_through_a_link(store: JsonlSessionStore, outside: Path) -> None:
    store.append("real", hello())
    (store.root / "elsewhere.jsonl").symlink_to(outside)
    assert [info.session_id for info in store.list()] == ["real"]


def test_a_link_planted_at_the_old_probe_name_is_not_written_through(tmp_path: Path, outside: Path) -> None:
    """Opening the store checks that its folder is writable with a file it removes after: that
    file's name cannot be guessed in advance, so a link waiting for it empties nothing."""
    root = tmp_path / "sessions"
    root.mkdir(mode=0o700)
    planted = root / f".probe-{os.getpid()}"
    planted.symlink_to(outside)
    store = JsonlSessionStore(root)
    assert outside.read_bytes() == SECRET
    assert sorted(p.name for p in root.iterdir()) == [planted.name]  # the probe was removed
    store.append("s", hello())
    assert texts(store.load("s")) == ["hello"]


# -- a folder where a session's file goes -------------------------------------------------------


def test_a_folder_at_the_transcript_is_an_error_that_names_it(store: JsonlSessionStore) -> None:
    store.path("s").mkdir()
    with pytest.raises(ConfigError, match=r"s\.jsonl is a folder.*remove it"):
        store.load("s")
    with pytest.raises(ConfigError, match=r"s\.jsonl is a folder"):
        store.append("s", hello())
    with pytest.raises(ConfigError, match=r"s\.jsonl is a folder"):
        store.rewrite("s", hello())
    assert store.list() == []
