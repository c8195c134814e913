"""Defects earlier sessions noticed in the command and left alone (session 17)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.cli.conftest import run_main, tether


def test_kb_called_in_process_leaves_the_programs_blas_threads_alone(
    tether_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``main(["kb", ...])`` set OPENBLAS_NUM_THREADS=1 in the calling program's environment
    and left it there, so an app or a test that embeds tether had every later numpy it loaded, and
    every child it started, held to one BLAS thread. The process's own ``tether kb`` still sets it
    (tests/cli/test_main.py checks that)."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "placeholder")  # so the undo below puts back what was
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valves.md").write_text("# Valves\n\nThe valve is rated for sixteen bar.\n")
    assert run_main("kb", "add", str(docs), "--embedder", "hashing/64", capsys=capsys)[0] == 0
    code, out, _ = run_main("kb", "search", "--mode", "vector", "valve", capsys=capsys)
    assert code == 0 and "sixteen bar" in out
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_memory_clear_removes_the_copies_kept_of_a_damaged_file_and_says_so(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether memory clear`` emptied notes.md but left ``notes.md.damaged-<time>``, the copy
    of the file as it was when a write found it not UTF-8, holding every old note: a person who
    cleared their memory still had it on disk, and was not told. A file of their own beside it stays."""
    assert run_main("memory", "add", "first note", capsys=capsys)[0] == 0
    notes = tether_home / "memory" / "notes.md"
    with notes.open("ab") as f:
        f.write(b"- the door code is kept \xff\xfe here\n")
    assert run_main("memory", "add", "second note", capsys=capsys)[0] == 0
    copies = list(notes.parent.glob("notes.md.damaged-*"))
    assert len(copies) == 1 and b"first note" in copies[0].read_bytes()
    mine = notes.parent / "notes.md.damaged-by-hand.txt"
    mine.write_text("the person's own file")

    code, out, _ = run_main("memory", "clear", "--notes", "--yes", capsys=capsys)

    assert code == 0
    assert not copies[0].exists()
    assert f"Removed 1 damaged copy of it: {copies[0]}" in out
    assert mine.exists()
    assert "first note" not in "".join(p.read_text(errors="replace") for p in notes.parent.iterdir() if p != mine)


def test_mcp_serve_http_on_a_busy_port_says_it_as_serve_does_with_its_exit_code(env: dict[str, str]) -> None:
    """Was: ``tether mcp serve --http --port N`` where another process listens said "cannot listen
    on ...: Address already in use (while attempting to bind on address ...)" and exited 2 (a usage
    error), where ``tether serve`` says what to do in one line and exits 6."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        mcp = tether("mcp", "serve", "--http", "--port", port, env=env, timeout=60)
        serve = tether("serve", "--model", "scripted/plan", "--port", port, env=env, timeout=60)
    assert (mcp.returncode, serve.returncode) == (6, 6), (mcp.stderr, serve.stderr)
    assert mcp.stderr.replace("tether mcp serve:", "tether serve:") == serve.stderr
    assert mcp.stderr.count("\n") == 1 and "--port 0 picks a free one" in mcp.stderr


@pytest.mark.parametrize(
    ("model", "meant"),
    [
        ("opnai/gpt-4o", "Did you mean openai/gpt-4o?"),
        ("anthropc/claude-sonnet-4-5", "Did you mean anthropic/claude-sonnet-4-5?"),
        ("scripted/plann", "(did you mean scripted/plan?)"),
        ("scripted/destructve", "(did you mean scripted/destructive?)"),
    ],
)
def test_a_misspelt_provider_or_scenario_is_refused_with_the_nearest_name(
    model: str, meant: str, tether_home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether run --model opnai/gpt-4o`` listed the known providers and ``scripted/plann``
    the scenarios, but neither said which one was meant: the reader compared the list by eye."""
    code, out, err = run_main("run", "--model", model, "--cwd", str(workspace), "hi", capsys=capsys)
    assert code == 2 and out == ""
    assert meant in err, err
    assert "Known: openai, anthropic, scripted" in err or "known: plan, " in err, err  # the list stays


def test_a_name_near_nothing_gets_the_list_and_no_guess(
    tether_home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guess is only for a near name: far from all of them, the list alone."""
    for model in ("zzqx/gpt-4o", "scripted/zzqx"):
        code, _, err = run_main("run", "--model", model, "--cwd", str(workspace), "hi", capsys=capsys)
        assert code == 2 and "did you mean" not in err.lower() and "nown: " in err, err


def test_resume_last_resumes_the_newest_run_that_can_be_resumed(
    quiet_env: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether resume last`` answered "no run 'last'": resuming the run that just stopped
    meant copying its id from the hint, where ``tether show`` and ``trace`` took ``last``. Now it is
    the newest run that can be resumed (a run that completed since is skipped), named first."""
    code, _, err = run_main("resume", "last", capsys=capsys)
    assert code == 2 and "there is no run yet" in err
    code, _, err = run_main(
        "run", "--model", "scripted/destructive", "--cwd", str(workspace), "Free some space", capsys=capsys
    )
    assert code == 5, err
    waiting = err.strip().rsplit("tether resume ", 1)[-1].split()[0]
    code, _, err = run_main("run", "--model", "scripted/hello", "--cwd", str(workspace), "hi", capsys=capsys)
    assert code == 0, err  # the newest run, completed: not the one to resume

    code, out, err = run_main("resume", "last", "--reject", "keep the log", capsys=capsys)

    assert code == 0, err
    assert err.startswith(f"resuming {waiting} (last: the newest run that can be resumed)"), err
    assert "declined" in out and (workspace / "access.log").exists()  # that run, decided as asked
    code, _, err = run_main("resume", "last", capsys=capsys)
    assert code == 2 and "no run can be resumed" in err, err
