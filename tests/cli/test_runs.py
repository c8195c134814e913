"""``tether runs``, ``tether show`` and ``tether trace`` (src/tether/cli/runs.py): readable
transcripts, and damaged files that never end in a traceback."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import tether, tether_json
from tests.conftest import EXAMPLE_WORKSPACE
from tether.harness.store import _encode_header, read_header


def plan_run(workspace: Path, env: dict[str, str]) -> str:
    result = tether_json("run", "--model", "scripted/plan", "--cwd", str(workspace), "q", env=env)
    run_id: str = result["run_id"]
    return run_id


def test_runs_lists_and_show_prints_transcript(workspace: Path, env: dict[str, str]) -> None:
    run_id = plan_run(workspace, env)
    assert run_id in tether("runs", env=env).stdout
    shown = tether("show", run_id, env=env).stdout
    assert "read_file" in shown and "worker 7 timed out" in shown


def test_runs_shows_the_latest_by_default_and_every_one_with_all(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    from tether.cli.runs import RUNS_SHOWN

    plan_run(workspace, env)
    first = json.loads(tether("runs", "--json", env=env).stdout)[0]
    for n in range(RUNS_SHOWN + 2):  # copies of a real run, each newer than the last
        copy = tether_home / "runs" / f"run_copy{n:03d}"
        shutil.copytree(tether_home / "runs" / first["run_id"], copy)
        header = {**(read_header(tether_home / "runs" / first["run_id"]) or {}), "run_id": copy.name}
        header["created_at"] = first["created_at"] + n + 1
        for slot in ("state.a.json", "state.b.json"):
            (copy / slot).write_bytes(_encode_header(header))
    listed = tether("runs", env=env)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == RUNS_SHOWN + 1  # the heading
    assert f"the latest {RUNS_SHOWN} of {RUNS_SHOWN + 3} runs; --all" in listed.stderr
    assert "run_copy021" in listed.stdout.splitlines()[1]  # newest first
    every = tether("runs", "list", "--all", "--json", env=env)
    assert every.returncode == 0 and len(json.loads(every.stdout)) == RUNS_SHOWN + 3
    assert len(json.loads(tether("runs", "--limit", "2", "--json", env=env).stdout)) == 2


def test_runs_json_has_the_fields_a_script_reads(workspace: Path, env: dict[str, str]) -> None:
    run_id = plan_run(workspace, env)
    (row,) = json.loads(tether("runs", "list", "--json", env=env).stdout)
    assert row["run_id"] == run_id and row["status"] == "completed" and row["turns"] == 3
    assert row["prompt"] == "q" and row["model"] == "scripted/plan" and row["cost_usd"] is not None


def test_trace_answers_what_the_run_cost(workspace: Path, env: dict[str, str]) -> None:
    result = tether_json("run", "--model", "scripted/plan", "--cwd", str(workspace), "q", env=env)
    lines = [json.loads(x) for x in tether("trace", result["run_id"], env=env).stdout.splitlines()]
    assert all(line["run_id"] == result["run_id"] for line in lines)
    assert [x["type"] for x in lines] == [
        "turn",
        "tool_start",
        "tool_result",
        "turn",
        "tool_start",
        "tool_result",
        "turn",
        "run_stopped",
    ]
    turns = [x for x in lines if x["type"] == "turn"]
    assert turns[-1]["cost_usd"] == pytest.approx(result["cost_usd"])
    assert all({"prompt_tokens", "completion_tokens", "total_tokens", "finish"} <= set(t) for t in turns)
    assert lines[-1]["status"] == "completed" and lines[-1]["turns"] == 3


def test_a_damaged_trace_prints_the_good_lines_and_counts_the_rest(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    run_id = plan_run(workspace, env)
    path = tether_home / "traces" / f"{run_id}.jsonl"
    good = path.read_bytes()
    path.write_bytes(
        b"garbage line\n"
        + good
        + b"\xff\xfe\x00binary junk\n42\n"
        + b'{"run_id": "'
        + run_id.encode()
        + b'", "type": "tu'
    )
    out = tether("trace", run_id, env=env)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert out.stdout == good.decode()
    assert "skipped 4 damaged lines" in out.stderr and "the last one cut short" in out.stderr
    assert str(path) in out.stderr and len(out.stderr.strip().splitlines()) == 1


def set_header(run_dir: Path, **changes: Any) -> None:
    """Rewrite both header slots with ``changes`` and a valid checksum (as an edit by hand followed
    by a checksum fix, or a buggy tool, would leave them)."""
    header = read_header(run_dir)
    assert header is not None
    header.update(changes)
    for slot in ("state.a.json", "state.b.json"):
        (run_dir / slot).write_bytes(_encode_header(header))


# (what a hand edit changed, whether `tether runs` still lists the run, whether it still loads)
BAD_HEADERS = [
    ({"turns": "x"}, False, True),  # turns is derived from the transcript on load, never read back
    ({"cost_usd": "abc"}, False, False),
    ({"status": 7}, False, False),
    ({"created_at": "yesterday"}, False, False),
    ({"message_count": "many"}, True, False),  # runs does not read the transcript
]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A home holding two finished runs made by the real command, made once for every bad header
    below (each test damages its own copy)."""
    base = tmp_path_factory.mktemp("two-runs")
    workspace, home = base / "workspace", base / "home"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE", "TETHER_MODEL")
    }
    env["TETHER_HOME"] = str(home)
    return home, plan_run(workspace, env), plan_run(workspace, env)


@pytest.mark.parametrize(("changes", "listed", "loads"), BAD_HEADERS, ids=[next(iter(c)) for c, _, _ in BAD_HEADERS])
def test_a_bad_header_is_one_line_and_runs_lists_the_others(
    changes: dict[str, Any],
    listed: bool,
    loads: bool,
    two_runs: tuple[Path, str, str],
    env: dict[str, str],
    tether_home: Path,
) -> None:
    made, good, bad = two_runs
    shutil.copytree(made, tether_home)
    set_header(tether_home / "runs" / bad, **changes)
    shown = tether("runs", env=env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    assert good in shown.stdout and (bad in shown.stdout) is listed
    if not listed:
        assert f"skipped run {bad}" in shown.stderr and next(iter(changes)) in shown.stderr
    out = tether("show", bad, env=env)
    assert "Traceback" not in out.stderr
    if loads:
        assert out.returncode == 0
        return
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "the header of" in out.stderr and bad in out.stderr and "delete the run" in out.stderr
    resumed = tether("resume", bad, env=env)
    assert resumed.returncode == 2 and resumed.stderr == out.stderr


def test_runs_names_a_run_whose_both_header_slots_are_damaged(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    good = plan_run(workspace, env)
    bad = plan_run(workspace, env)
    for slot in ("state.a.json", "state.b.json"):
        path = tether_home / "runs" / bad / slot
        path.write_bytes(path.read_bytes().replace(b'"run_id"', b'"run_iX"'))  # edited, checksum stale
    listed = tether("runs", env=env)
    assert good in listed.stdout and f"skipped run {bad}" in listed.stderr and "damaged" in listed.stderr


def test_show_reads_like_a_transcript(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    (workspace / "big.log").write_text("".join(f"line {i}\n" for i in range(200)))
    (workspace / "access.log").write_text("log\n")
    first = tether_json("run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space", env=env)
    waiting = tether("show", first["run_id"], env=env).stdout
    assert 'waiting for approval of delete_file {"path": "access.log"}' in waiting
    assert f"tether resume {first['run_id']} --approve" in waiting
    tether("resume", first["run_id"], "--reject", "keep it", env=env)
    shown = tether("show", first["run_id"], env=env).stdout
    assert "#1 user\n    free space" in shown
    assert '-> delete_file {"path": "access.log"}   [call c2]' in shown
    assert "tool delete_file [call c2]: declined by a person" in shown
    assert "tool list_files [call c1]: ok" in shown

    long = tether_json("run", "--model", "scripted/single_read", "--cwd", str(workspace), "q", env=env)
    store = tether_home / "runs" / long["run_id"]
    assert store.exists()
    (workspace / "errors.log").write_text("".join(f"entry {i}\n" for i in range(100)))
    long = tether_json("run", "--model", "scripted/single_read", "--cwd", str(workspace), "q", env=env)
    short = tether("show", long["run_id"], env=env).stdout
    assert "entry 5" in short and "entry 99" not in short
    assert f"more lines not shown; tether show {long['run_id']} --full prints everything" in short
    full = tether("show", long["run_id"], "--full", env=env).stdout
    assert "entry 99" in full and "not shown" not in full


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"ext": {"config": {"model": "scripted/destructive"}}}, "its saved config has no cwd"),
        ({"message_count": "abc"}, "does not add up"),
    ],
)
def test_a_header_that_passes_its_checksum_but_lacks_what_resume_needs_is_one_line(
    workspace: Path, env: dict[str, str], tether_home: Path, change: dict[str, Any], said: str
) -> None:
    result = tether_json("run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space", env=env)
    assert result["status"] == "interrupted"
    set_header(tether_home / "runs" / result["run_id"], **change)
    out = tether("resume", result["run_id"], "--approve", env=env)
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "KeyError" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert (workspace / "access.log").exists()  # nothing ran


def test_a_run_left_running_by_a_dead_process_says_so_and_how_to_go_on(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    """Saved ``running`` with no process holding it (its process was killed): ``runs`` and ``show``
    say it stopped and how to continue; while a process holds it, it is running."""
    from tether.cli.runs import STOPPED
    from tether.harness.store import RunStore

    run_id = plan_run(workspace, env)
    set_header(tether_home / "runs" / run_id, status="running")  # what a kill -9 mid-run leaves
    listed = tether("runs", env=env).stdout
    assert STOPPED in listed
    (row,) = json.loads(tether("runs", "--json", env=env).stdout)
    assert row["status"] == "running" and row["live"] is False
    shown = tether("show", run_id, env=env).stdout
    assert f"{run_id}: {STOPPED}" in shown and f"next: tether resume {run_id}" in shown
    with RunStore(tether_home / "runs").lock(run_id):  # a process running it now
        assert STOPPED not in tether("runs", env=env).stdout
        (row,) = json.loads(tether("runs", "--json", env=env).stdout)
        assert row["live"] is True
        shown = tether("show", run_id, env=env).stdout
        assert f"{run_id}: running" in shown and "tether resume" not in shown
    done = json.loads(tether("runs", "--json", env=env).stdout)
    assert done[0]["live"] is False


def test_a_finished_run_is_not_asked_whether_it_is_held(workspace: Path, env: dict[str, str]) -> None:
    plan_run(workspace, env)
    (row,) = json.loads(tether("runs", "--json", env=env).stdout)
    assert row["status"] == "completed" and row["live"] is None
