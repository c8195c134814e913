"""``tether sessions`` and ``--session`` (src/tether/cli/sessions.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import tether, tether_json


def test_run_with_a_session_continues_the_conversation(workspace: Path, env: dict[str, str]) -> None:
    first = tether_json(
        "run",
        "--session",
        "work",
        "--model",
        "scripted/plan",
        "--cwd",
        str(workspace),
        "Which file mentions a timeout?",
        env=env,
    )
    assert first["status"] == "completed" and first["turns"] == 3
    second = tether_json("run", "--session", "work", "--model", "scripted/hello", "Thanks!", env=env)
    assert second["status"] == "completed" and second["turns"] == 1  # this run's turns, not the session's
    assert "work" in tether("sessions", "list", env=env).stdout
    shown = tether("sessions", "show", "work", env=env).stdout
    assert shown.index("Which file mentions a timeout?") < shown.index("Thanks!")
    exported = [json.loads(x) for x in tether("sessions", "export", "work", env=env).stdout.splitlines()]
    assert len(exported) == 8 and exported[-1]["role"] == "assistant"
    assert tether("sessions", "delete", "work", env=env).returncode == 0
    assert tether("sessions", "show", "work", env=env).returncode == 2


def test_the_session_store_option_goes_before_or_after_the_subcommand(env: dict[str, str], tether_home: Path) -> None:
    out = tether(
        "run", "--session", "s", "--session-store", "sqlite", "--model", "scripted/hello", "--json", "hi", env=env
    )
    assert out.returncode == 0 and (tether_home / "sessions.db").exists()
    before = tether("sessions", "--session-store", "sqlite", "list", env=env)
    after = tether("sessions", "list", "--session-store", "sqlite", env=env)
    assert before.returncode == after.returncode == 0, after.stderr
    assert "s " in before.stdout and before.stdout == after.stdout
    assert "s " not in tether("sessions", "list", env=env).stdout  # the default store is another one
    assert tether("sessions", "show", "s", "--session-store", "sqlite", env=env).returncode == 0


def test_deleting_a_session_that_does_not_exist_says_so(env: dict[str, str], tether_home: Path) -> None:
    out = tether("sessions", "delete", "nosuch", env=env)
    assert out.returncode == 2 and "there is no session 'nosuch'" in out.stderr and "deleted" not in out.stderr
    assert not list((tether_home / "sessions").glob("*nosuch*"))  # asking created nothing


def test_an_unusable_session_store_names_the_real_option(workspace: Path, env: dict[str, str]) -> None:
    for argv in (
        ["run", "--model", "scripted/hello", "--session", "s", "--session-store", "jsonl:/proc/nope", "hi"],
        ["sessions", "list", "--session-store", "jsonl:/proc/nope"],
        ["chat", "--model", "scripted/hello", "--session-store", "jsonl:/proc/nope"],
    ):
        out = tether(*argv, env=env)
        assert out.returncode == 2, out.stderr
        assert "--session-store" in out.stderr and "jsonl:/proc/nope" in out.stderr
        assert "--sessions-dir" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = tether("sessions", "list", env={**env, "TETHER_SESSION_STORE": "jsonl:/proc/nope"})
    assert out.returncode == 2 and "$TETHER_SESSION_STORE" in out.stderr


def test_sessions_list_json(workspace: Path, env: dict[str, str]) -> None:
    assert tether("run", "--session", "work", "--model", "scripted/hello", "hi", env=env).returncode == 0
    rows = json.loads(tether("sessions", "list", "--json", env=env).stdout)
    assert [(r["session_id"], r["messages"]) for r in rows] == [("work", 2)] and rows[0]["updated_at"] > 0
    empty = tether("sessions", "list", "--json", "--session-store", "sqlite", env=env)
    assert empty.returncode == 0 and json.loads(empty.stdout) == []
