"""The command line attacked as a hostile or unlucky user would: ``tether run`` killed (SIGKILL) or
stopped (Ctrl-C) mid-run and resumed, hostile prompts, options, homes and config files, damaged run
folders, closed streams, and a secret in the environment. Every test is the real command in a
subprocess with its own ``TETHER_HOME``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import tether

SECRET = "sk-test-SECRET-0f9e8d"

# A program the scripted `fix` model edits ("helo" -> "hello") and then runs: each run appends one
# line to ran.log, so a command run twice shows. It ends only once the file `go` is in its folder (60 s
# at most: a hang guard), so a run cannot end before the kill the test sends, whatever the machine's
# load (a half-second sleep did not: a test read late from a loaded machine killed a finished run).
GREET = (
    'import os, time\nwith open("ran.log", "a") as f:\n    f.write("ran\\n")\n'
    'for _ in range(3000):\n    if os.path.exists("go"):\n        break\n    time.sleep(0.02)\nprint("helo")\n'
)
# The same, but it stays running long after it has written its line.
GREET_SLOW = 'import time\nwith open("ran.log", "a") as f:\n    f.write("ran\\n")\ntime.sleep(30)\nprint("helo")\n'


@pytest.fixture
def secret_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "OPENAI_API_KEY": SECRET}


def _fix_workspace(root: Path, program: str = GREET) -> Path:
    ws = root / "fixws"
    ws.mkdir()
    (ws / "greet.py").write_text(program)
    return ws


def _start(*args: str, env: dict[str, str], **kwargs: Any) -> subprocess.Popen[str]:
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(
        ["tether", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def _trace_of(home: Path) -> Path | None:
    traces = home / "traces"
    found = sorted(traces.glob("*.jsonl")) if traces.is_dir() else []
    return found[0] if found else None


def _wait_for_events(home: Path, text: str, count: int, proc: subprocess.Popen[str]) -> str:
    """Wait until the run's trace has ``count`` lines containing ``text``; return the run id."""
    deadline = time.monotonic() + 30  # a hang guard only
    while time.monotonic() < deadline:
        trace = _trace_of(home)
        if trace is not None and sum(text in line for line in trace.read_text().splitlines()) >= count:
            return trace.stem
        assert proc.poll() is None, f"the run ended before {count} x {text!r}: {proc.communicate()}"
        time.sleep(0.002)
    raise AssertionError(f"no {count} x {text!r} in the trace")


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def _json_of(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.stdout, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text
        assert SECRET not in text


def _runs(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = tether("runs", "--json", env=env)
    assert out.returncode == 0, out.stderr
    return {row["run_id"]: row for row in json.loads(out.stdout)}


def _turn_events(home: Path, run_id: str) -> list[dict[str, Any]]:
    """The trace's ``turn`` events: one per model reply recorded, across every process of the run."""
    events = [json.loads(line) for line in (home / "traces" / f"{run_id}.jsonl").read_text().splitlines()]
    return [event for event in events if event["type"] == "turn"]


def _priced(turns: list[dict[str, Any]]) -> float:
    """What these turns cost at the scripted model's prices: $2 and $12 per million tokens."""
    return sum(event["prompt_tokens"] * 2e-6 + event["completion_tokens"] * 12e-6 for event in turns)


def _no_secret_under(home: Path) -> None:
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.fixture(scope="module")
def fix_baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The `fix` run, uncrashed: what a crashed and resumed one must come to."""
    base = tmp_path_factory.mktemp("fix_baseline")
    ws = _fix_workspace(base)
    (ws / "go").write_text("")  # no kill to wait for: the program ends at once
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE", "TETHER_MODEL")
    }
    out = tether(
        "run",
        "--model",
        "scripted/fix",
        "--cwd",
        str(ws),
        "fix greet.py",
        "--json",
        env={**env, "TETHER_HOME": str(base / "home")},
    )
    assert out.returncode == 0, out.stderr
    assert (ws / "ran.log").read_text() == "ran\n"
    return _json_of(out)


# --- SIGKILL, then resume ---------------------------------------------------------------------


def _resume_to_the_end(run_id: str, ws: Path, env: dict[str, str]) -> tuple[dict[str, Any], bool]:
    """Resume until the run ends; its result, and whether a person was asked. A kill can land
    while a call with side effects is out (after a ``turn`` line, its tool starts at once): the run
    then stops for a person, who looks at the workspace and says whether the call took effect."""
    for _ in range(3):
        resumed = tether("resume", run_id, "--json", env=env)
        _no_traceback(resumed.stdout, resumed.stderr)
        result = _json_of(resumed)
        if resumed.returncode != 5:
            assert resumed.returncode == 0, resumed.stderr
            return result, False
        waiting = result["interruption"]
        assert waiting["type"] == "outcome_unknown", waiting
        took_effect = {
            "edit_file": "hello" in (ws / "greet.py").read_text(),
            "run_command": (ws / "ran.log").exists(),
        }[waiting["tool_name"]]
        decided = (
            tether("resume", run_id, "--reject", "it had taken effect", "--json", env=env)
            if took_effect
            else tether("resume", run_id, "--approve", "--json", env=env)
        )
        _no_traceback(decided.stdout, decided.stderr)
        if decided.returncode != 5:
            assert decided.returncode == 0, decided.stderr
            return _json_of(decided), True
    raise AssertionError(f"run {run_id} did not end")


@pytest.mark.parametrize(
    ("event", "count"),
    [
        ('"type":"turn"', 1),
        ('"type":"tool_result"', 1),  # greet.py read
        ('"type":"turn"', 2),
        ('"type":"tool_result"', 2),  # greet.py edited
        ('"type":"turn"', 3),
    ],
)
def test_killed_after_a_saved_step_resumes_without_acting_or_paying_twice(
    tmp_path: Path, secret_env: dict[str, str], tether_home: Path, fix_baseline: dict[str, Any], event: str, count: int
) -> None:
    ws = _fix_workspace(tmp_path)
    proc = _start("run", "--model", "scripted/fix", "--cwd", str(ws), "fix greet.py", env=secret_env)
    run_id = _wait_for_events(tether_home, event, count, proc)
    proc.send_signal(signal.SIGKILL)
    code, out, err = _finish(proc)
    assert code == -signal.SIGKILL
    assert _runs(secret_env)[run_id]["status"] == "running"  # as the crash left it
    (ws / "go").write_text("")  # the program, if it ran (or when it runs), may end

    result, asked = _resume_to_the_end(run_id, ws, secret_env)
    assert result["status"] == "completed"
    assert result["turns"] == fix_baseline["turns"]
    # Paid once: each turn's call once, at the scripted model's prices ($2 and $12 per million
    # tokens in and out); a request lost in the kill is counted apart, as its worst case.
    turns = _turn_events(tether_home, run_id)
    assert [t["turn"] for t in turns] == list(range(1, result["turns"] + 1))
    assert result["cost_usd"] == pytest.approx(_priced(turns), abs=1e-9)
    if not asked:  # the transcript is the uncrashed run's: so is what it cost
        assert result["cost_usd"] == pytest.approx(fix_baseline["cost_usd"], abs=1e-12)
        assert result["usage"] == fix_baseline["usage"]
    # Done once: the edit applied once (a second would not find "helo"), the program run once.
    assert (ws / "greet.py").read_text() == GREET.replace("helo", "hello")
    assert (ws / "ran.log").read_text() == "ran\n"
    assert {name: s["calls"] for name, s in result["tool_stats"].items()} == {
        "read_file": 1,
        "edit_file": 1,
        "run_command": 1,
    }

    row = _runs(secret_env)[run_id]
    assert (row["status"], row["turns"]) == ("completed", result["turns"])
    assert row["cost_usd"] == pytest.approx(result["cost_usd"], abs=1e-12)
    shown = tether("show", run_id, env=secret_env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"run {run_id}: completed, {result['turns']} turns")
    assert shown.stdout.count("-> run_command") == 1 and shown.stdout.count("-> edit_file") == 1
    again = tether("resume", run_id, env=secret_env)
    assert again.returncode == 2
    assert "already ended (completed)" in again.stderr
    _no_traceback(out, err, shown.stdout, again.stderr)
    _no_secret_under(tether_home)


def test_killed_while_its_command_runs_stops_for_a_person_and_never_reruns_it(
    tmp_path: Path, secret_env: dict[str, str], tether_home: Path
) -> None:
    ws = _fix_workspace(tmp_path, GREET_SLOW)
    proc = _start("run", "--model", "scripted/fix", "--cwd", str(ws), "fix greet.py", env=secret_env)
    run_id = _wait_for_events(tether_home, '"tool_name":"run_command"', 1, proc)
    deadline = time.monotonic() + 30  # a hang guard only
    while not (ws / "ran.log").exists():  # the command has started and written its line
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    _finish(proc)

    stopped = tether("resume", run_id, "--json", env=secret_env)
    _no_traceback(stopped.stdout, stopped.stderr)
    assert stopped.returncode == 5, stopped.stderr
    waiting = _json_of(stopped)["interruption"]
    assert (waiting["type"], waiting["tool_name"]) == ("outcome_unknown", "run_command")
    assert f"tether resume {run_id} --approve" in stopped.stderr
    assert _runs(secret_env)[run_id]["status"] == "interrupted"

    # Rejected with what the person found: the run goes on without running it again.
    done = tether("resume", run_id, "--reject", "it printed its line once", "--json", env=secret_env)
    assert done.returncode == 0, done.stderr
    assert _json_of(done)["status"] == "completed"
    assert (ws / "ran.log").read_text() == "ran\n"
    shown = tether("show", run_id, env=secret_env).stdout
    assert "it printed its line once" in shown
    assert shown.count("-> run_command") == 1
    _no_secret_under(tether_home)


# --- Ctrl-C -----------------------------------------------------------------------------------


def test_ctrl_c_mid_tool_exits_130_and_resume_finishes_with_one_more_turn(
    workspace: Path, secret_env: dict[str, str], tether_home: Path
) -> None:
    proc = _start("run", "--model", "scripted/slow", "--cwd", str(workspace), "scan the archive", env=secret_env)
    run_id = _wait_for_events(tether_home, '"type":"tool_progress"', 1, proc)
    proc.send_signal(signal.SIGINT)
    code, out, err = _finish(proc)
    _no_traceback(out, err)
    assert code == 130, err
    assert "[interrupted] cancelled: user pressed Ctrl-C" in err
    assert f"tether resume {run_id}" in err
    stopped = _runs(secret_env)[run_id]
    assert (stopped["status"], stopped["turns"]) == ("interrupted", 1)

    resumed = tether("resume", run_id, "--json", env=secret_env)
    _no_traceback(resumed.stdout, resumed.stderr)
    assert resumed.returncode == 0, resumed.stderr
    result = _json_of(resumed)
    assert (result["status"], result["turns"]) == ("completed", 2)
    assert result["output"] == "The archive scan finished: scanned 1200 files: no problems found"
    # Each of the two model calls paid once.
    turns = _turn_events(tether_home, run_id)
    assert [event["turn"] for event in turns] == [1, 2]
    assert result["cost_usd"] == pytest.approx(_priced(turns), abs=1e-9)
    assert turns[0]["cost_usd"] == pytest.approx(stopped["cost_usd"], abs=1e-12)
    assert result["cost_unknown_usd"] == 0
    assert _runs(secret_env)[run_id]["status"] == "completed"
    _no_secret_under(tether_home)


def test_ctrl_c_before_the_run_starts_is_exit_130_without_a_traceback(
    tmp_path: Path, workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    # The prompt comes from a named pipe: the command waits in its read, before any run exists,
    # where no run's Ctrl-C handler is in place yet.
    fifo = tmp_path / "prompt.fifo"
    os.mkfifo(fifo)
    proc = _start("run", "--model", "scripted/hello", "--cwd", str(workspace), f"@{fifo}", env=env)
    deadline = time.monotonic() + 30  # a hang guard only
    while True:  # opening the writing end without blocking succeeds once the command has it open
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.002)
    try:
        proc.send_signal(signal.SIGINT)  # in its open of the pipe or its read: the same either way
        code, out, err = _finish(proc)
    finally:
        os.close(writer)
    assert code == 130, err
    assert out == ""
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip() == "tether: interrupted (Ctrl-C)"
    assert not (tether_home / "runs").exists() or not any((tether_home / "runs").iterdir())


# --- hostile input ----------------------------------------------------------------------------


def test_a_cwd_in_a_loop_of_links_is_a_usage_error(tmp_path: Path, env: dict[str, str], tether_home: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    out = tether("run", "--model", "scripted/hello", "--cwd", str(tmp_path / "a"), "hi", env=env)
    _no_traceback(out.stderr)
    assert out.returncode == 2
    assert "argument --cwd" in out.stderr and "cannot be resolved" in out.stderr
    assert not (tether_home / "runs").exists()


@pytest.mark.parametrize("command", ["show", "resume", "trace"])
def test_a_run_id_too_long_for_the_file_system_is_one_line(
    command: str, env: dict[str, str], tether_home: Path
) -> None:
    (tether_home / "runs").mkdir(parents=True)  # the name is then looked up in it
    (tether_home / "traces").mkdir()
    out = tether(command, "run_" + "x" * 300, env=env)
    _no_traceback(out.stdout, out.stderr)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith("tether: cannot read") and "File name too long" in out.stderr


@pytest.mark.parametrize("memory", [[], ["--no-memory", "--no-skills"]])
def test_a_home_that_cannot_be_made_is_said_before_anything_runs(
    tmp_path: Path, workspace: Path, env: dict[str, str], memory: list[str]
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where TETHER_HOME's parent should be")
    home_env = {**env, "TETHER_HOME": str(blocker / "home")}
    out = tether("run", "--model", "scripted/hello", "--cwd", str(workspace), *memory, "hi", env=home_env)
    _no_traceback(out.stdout, out.stderr)
    assert out.returncode == 2
    assert out.stdout == ""  # nothing ran: no answer
    assert f"{blocker} is a file, not a folder" in out.stderr
    assert "Set TETHER_HOME to a folder you can write" in out.stderr
    assert blocker.read_text() == "a file where TETHER_HOME's parent should be"


def test_a_run_with_stdout_closed_completes_without_a_traceback(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    proc = subprocess.run(
        ["tether", "run", "--model", "scripted/plan", "--cwd", str(workspace), "Which file mentions a timeout?"],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),  # started as `tether run ... >&-`
    )
    _no_traceback(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert "[completed] the model answered" in proc.stderr
    (row,) = _runs(env).values()
    assert row["status"] == "completed"


def test_resume_refuses_a_run_whose_directory_is_gone_and_keeps_it_resumable(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    first = tether(
        "run", "--model", "scripted/destructive", "--cwd", str(workspace), "Free some disk space", "--json", env=env
    )
    assert first.returncode == 5, first.stderr
    run_id = _json_of(first)["run_id"]
    moved = workspace.with_name("moved")
    workspace.rename(moved)
    refused = tether("resume", run_id, "--approve", env=env)
    _no_traceback(refused.stderr)
    assert refused.returncode == 2
    assert f"{workspace}, which is no longer a directory; nothing was run" in refused.stderr
    assert _runs(env)[run_id]["status"] == "interrupted"
    moved.rename(workspace)
    done = tether("resume", run_id, "--approve", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert _json_of(done)["output"] == "Deleted access.log to free space."
    assert not (workspace / "access.log").exists()


def test_prompts_hostile_in_size_and_encoding(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    big = "word " * 1_000_000  # 5 MB
    out = tether("run", "--model", "scripted/hello", "--cwd", str(workspace), "-", "--json", env=env, input=big)
    assert out.returncode == 0, out.stderr
    run_id = _json_of(out)["run_id"]
    assert _runs(env)[run_id]["prompt"] == big[:200]
    assert tether("show", run_id, env=env).returncode == 0

    before = set(_runs(env))
    bad = subprocess.run(
        ["tether", "run", "--model", "scripted/hello", "--cwd", str(workspace)],
        env=env,
        input=b"hello \xff\xfe there",
        capture_output=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stderr.decode() == "tether: the prompt on standard input is not UTF-8 text\n"
    for args, said in (
        (["   \n"], "the prompt from the argument is empty"),
        (["--bogus", "hi"], "unrecognized arguments: --bogus"),
        (["--cwd", str(workspace / "errors.log"), "hi"], "is not a directory"),
        (["@" + str(workspace)], "Is a directory"),
    ):
        refused = tether(
            "run",
            "--model",
            "scripted/hello",
            *(["--cwd", str(workspace)] if "--cwd" not in args else []),
            *args,
            env=env,
        )
        _no_traceback(refused.stderr)
        assert refused.returncode == 2, args
        assert said in refused.stderr, refused.stderr
    assert set(_runs(env)) == before  # nothing refused made a run


def test_files_the_agent_reads_in_no_encoding_do_not_break_the_run_or_its_listing(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    (workspace / "errors.log").write_bytes((workspace / "errors.log").read_bytes() + b"\xff\xfe timed out \xc3\x28\n")
    (workspace / os.fsdecode(b"\xffodd\xfe.txt")).write_bytes(b"\x00\x01")
    out = tether(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "Which file mentions a timeout?", "--json", env=env
    )
    _no_traceback(out.stderr)
    assert out.returncode == 0, out.stderr
    run_id = _json_of(out)["run_id"]
    for command in ("show", "trace"):
        shown = tether(command, run_id, env=env)
        _no_traceback(shown.stderr)
        assert shown.returncode == 0, shown.stderr
    assert _runs(env)[run_id]["status"] == "completed"


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (b'model = "scripted/hello', "Unterminated string"),
        (b"\xff\xfe = 1", "codec can't decode"),
        (b"max_turns = 3", "max_turns is not a known setting"),
        (b"[agents.x]\nmax_turns = -1", "[agents.x] max_turns must be greater than 0"),
        (b"agents = 5", "agents must be a table"),
        (b"[tools.shel]", "did you mean [tools.shell]"),
    ],
)
def test_a_broken_config_stops_every_command_in_one_line(
    workspace: Path, env: dict[str, str], tether_home: Path, config: bytes, said: str
) -> None:
    tether_home.mkdir(parents=True)
    (tether_home / "config.toml").write_bytes(config)
    for args in (
        ["run", "--model", "scripted/hello", "--cwd", str(workspace), "hi"],
        ["chat", "--model", "scripted/hello", "--cwd", str(workspace)],
        ["runs"],
        ["config", "check"],
    ):
        out = tether(*args, env=env)
        _no_traceback(out.stdout, out.stderr)
        assert out.returncode == 2, (args, out.stderr)
        assert said in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert sorted(p.name for p in tether_home.iterdir()) == ["config.toml"]


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_config_that_is_not_a_file_is_refused_not_waited_on(
    workspace: Path, env: dict[str, str], tether_home: Path, kind: str
) -> None:
    tether_home.mkdir(parents=True)
    path = tether_home / "config.toml"
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    out = tether("run", "--model", "scripted/hello", "--cwd", str(workspace), "hi", env=env, timeout=30)
    _no_traceback(out.stderr)
    assert out.returncode == 2
    assert f"cannot read {path}" in out.stderr and "move it away" in out.stderr


def test_damaged_run_folders_are_named_never_a_traceback(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    ids = [
        _json_of(tether("run", "--model", "scripted/plan", "--cwd", str(workspace), "hi", "--json", env=env))["run_id"]
        for _ in range(2)
    ]
    damaged, kept = ids
    runs = tether_home / "runs"
    for slot in ("state.a.json", "state.b.json"):
        (runs / damaged / slot).write_bytes(b"\x00garbage{")
    (runs / "stray-file").write_text("not a run")
    (runs / "empty-folder").mkdir()
    (tether_home / "traces" / f"{kept}.jsonl").open("ab").write(b'\xff\xfe torn {"type\n')

    listed = tether("runs", env=env)
    _no_traceback(listed.stdout, listed.stderr)
    assert listed.returncode == 0
    assert kept in listed.stdout and damaged not in listed.stdout
    assert f"tether: skipped run {damaged}: both header slots" in listed.stderr
    for command in ("show", "resume"):
        out = tether(command, damaged, env=env)
        _no_traceback(out.stderr)
        assert out.returncode == 2
        assert out.stderr.startswith("tether: both header slots") and "delete the run" in out.stderr
    trace = tether("trace", kept, env=env)
    assert trace.returncode == 0
    assert "skipped 1 damaged line" in trace.stderr and "(the last one cut short)" not in trace.stderr
    assert all(json.loads(line)["run_id"] == kept for line in trace.stdout.splitlines())
    shown = tether("show", "empty-folder", env=env)
    assert shown.returncode == 2 and "no run 'empty-folder'" in shown.stderr


def test_chat_with_stdin_closed_or_empty_leaves_cleanly(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    for stdin in (subprocess.DEVNULL, None):
        proc = subprocess.run(
            ["tether", "chat", "--model", "scripted/hello", "--cwd", str(workspace)],
            env=env,
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=(lambda: os.close(0)) if stdin is None else None,
        )
        _no_traceback(proc.stdout, proc.stderr)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.startswith("tether chat: scripted/hello in")
    assert not (tether_home / "runs").exists() or not any((tether_home / "runs").iterdir())


def test_a_secret_in_the_environment_never_reaches_a_file_or_the_output(
    workspace: Path, secret_env: dict[str, str], tether_home: Path
) -> None:
    outputs = []
    for args in (
        ["run", "--model", "scripted/plan", "--cwd", str(workspace), "Which file mentions a timeout?"],
        ["run", "--model", "scripted/remember", "--cwd", str(workspace), "Remember how I like my answers."],
        ["run", "--model", "scripted/destructive", "--cwd", str(workspace), "--session", "s1", "Free some disk space"],
        ["config", "show"],
        ["config", "show", "--json"],
        ["config", "check"],
        ["runs", "--json"],
        ["sessions", "export", "s1"],
        ["memory", "show", "--json"],
    ):
        out = tether(*args, env=secret_env)
        assert out.returncode in (0, 5), (args, out.stderr)
        outputs += [out.stdout, out.stderr]
    for run_id in _runs(secret_env):
        for command in ("show", "trace"):
            outputs.append(tether(command, run_id, env=secret_env).stdout)
    _no_traceback(*outputs)
    _no_secret_under(tether_home)
