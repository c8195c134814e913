"""One run at a time continues a session: a second run on it, in another process (or on another
machine sharing the database), is refused before it reads or writes anything, with the run that
holds the session named; once that run stops, the session is free again."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.session_child import run_store, waiting_agent
from tether import run_sync
from tether.errors import StoreError
from tether.messages import UserMessage, text_of
from tether.sessions import JsonlSessionStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runs(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where runs are kept: a folder, or a fresh Postgres database."""
    return str(tmp_path / "runs") if backend == "sqlite" else str(request.getfixturevalue("pg_url"))


@pytest.fixture
def holder(runs: str, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process whose run continues session s_talk and blocks in a tool until ``go`` exists."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.harness.session_child",
            runs,
            str(tmp_path / "sessions"),
            "s_talk",
            str(tmp_path / "go"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
    yield child
    (tmp_path / "go").touch()
    child.kill()
    child.wait()


def test_a_second_run_on_a_busy_session_is_refused_and_writes_nothing(
    runs: str, tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    sessions = JsonlSessionStore(tmp_path / "sessions")
    before = sessions.load("s_talk")
    with pytest.raises(StoreError, match=r"session s_talk is being continued by run run_\w+ in another process"):
        run_sync(waiting_agent(None), "me too", store=run_store(runs), session=sessions, session_id="s_talk")
    assert sessions.load("s_talk") == before  # the refused run added nothing to the conversation
    (tmp_path / "go").touch()
    out, _ = holder.communicate(timeout=60)
    assert out.strip().endswith("completed")
    after = run_sync(waiting_agent(None), "now me", store=run_store(runs), session=sessions, session_id="s_talk")
    assert after.status == "completed"  # the session is free once its run stopped
    texts = [text_of([m]) for m in sessions.load("s_talk") if isinstance(m, UserMessage)]
    assert texts == ["wait for it", "now me"]


def test_another_session_is_not_held_up(runs: str, tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    sessions = JsonlSessionStore(tmp_path / "sessions")
    result = run_sync(waiting_agent(None), "hello", store=run_store(runs), session=sessions, session_id="s_other")
    assert result.status == "completed"


def test_a_killed_holder_lets_go_of_the_session(runs: str, tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.kill()
    holder.wait()
    sessions = JsonlSessionStore(tmp_path / "sessions")
    result = run_sync(
        waiting_agent(None), "after the crash", store=run_store(runs), session=sessions, session_id="s_talk"
    )
    assert result.status == "completed"


def test_a_link_planted_at_the_session_lock_is_refused(tmp_path: Path) -> None:
    from tether import RunStore

    store = RunStore(tmp_path / "runs")
    locks = tmp_path / "runs" / ".sessions"
    locks.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (locks / "s_talk.lock").symlink_to(target)
    sessions = JsonlSessionStore(tmp_path / "sessions")
    with pytest.raises(StoreError, match="s_talk.lock is a symbolic link"):
        run_sync(waiting_agent(None), "hi", store=store, session=sessions, session_id="s_talk")
    assert target.read_text() == "keep"


def test_tether_run_on_a_busy_session_says_which_run_holds_it(tmp_path: Path) -> None:
    """The command line, as a person meets it: `tether run --session` while another process's run
    continues that session exits with the reason, and the session is unchanged."""
    import os

    home = tmp_path / "home"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.harness.session_child",
            str(home / "runs"),
            str(home / "sessions"),
            "s_talk",
            str(tmp_path / "go"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
        before = (home / "sessions" / "s_talk.jsonl").read_bytes()
        env = {k: v for k, v in os.environ.items() if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
        out = subprocess.run(
            ["tether", "run", "--model", "scripted/plan", "--session", "s_talk", "--cwd", str(tmp_path), "hello"],
            env={**env, "TETHER_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode != 0 and "Traceback" not in out.stderr
        assert "session s_talk is being continued by run run_" in out.stderr
        assert (home / "sessions" / "s_talk.jsonl").read_bytes() == before
    finally:
        (tmp_path / "go").touch()
        child.communicate(timeout=60)
