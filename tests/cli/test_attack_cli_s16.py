"""The command line attacked as a user meets it (session 16): the real ``tether`` command as a
subprocess, each with its own ``TETHER_HOME``."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from tests.cli.conftest import tether


def test_scripted_serve_on_a_busy_port_or_an_unknown_host_is_one_line_not_a_traceback(env: dict[str, str]) -> None:
    """`tether scripted serve --port N` where another process listens printed Python's traceback
    (OSError: Address already in use) and exit code 1, the code of a failed run; an unknown --host
    did the same (socket.gaierror). Now: one line naming the address and what to do, and exit code
    6, as `tether serve` says it cannot listen."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = tether("scripted", "serve", "--port", str(port), env=env, timeout=30)
    assert out.returncode == 6, out.stderr
    assert "Traceback" not in out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port" in out.stderr, out.stderr
    assert out.stdout == ""  # no address announced: nothing serves there

    out = tether("scripted", "serve", "--host", "nosuch.invalid", env=env, timeout=30)
    assert out.returncode == 6 and "Traceback" not in out.stderr, out.stderr
    assert "cannot listen on nosuch.invalid" in out.stderr, out.stderr


# A stdio MCP server that says what it connects to, then fails, as a database server does when it
# cannot reach its database: its last words quote its argument.
_FAILING_SERVER = "import sys; print('connecting to', sys.argv[1], sys.argv[2], file=sys.stderr); sys.exit(3)"


def test_a_password_in_an_mcp_servers_url_argument_is_never_shown(env: dict[str, str], tether_home: Path) -> None:
    """The official Postgres MCP server takes its database as a URL argument
    (``postgresql://user:password@host/db``). `tether config show` (whose output is made to be
    pasted), `tether mcp list` and a run's error printed the password whole, and a GitHub token
    given as a bare argument too, though docs/cli.md says every key, token and URL password is
    redacted. Now each shows ``<redacted>`` in its place, and the rest (the host) as it is."""
    password, token = "Pg5ecretPassw0rd", "ghp_" + "A1b2C3d4E5" * 4
    url = f"postgresql://app:{password}@db.internal:5432/sales"
    tether_home.mkdir(exist_ok=True)
    (tether_home / "config.toml").write_text(
        f"[mcp.pg]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(['-c', _FAILING_SERVER, url, token])}\n"
    )
    workspace = tether_home / "ws"
    workspace.mkdir()
    outs = {
        "config show": tether("config", "show", env=env),
        "config show --json": tether("config", "show", "--json", env=env),
        "mcp list": tether("mcp", "list", env=env, timeout=60),
        "run --mcp": tether(
            "run", "--model", "scripted/hello", "--mcp", "pg", "--cwd", str(workspace), "hi", env=env, timeout=60
        ),
    }
    for what, out in outs.items():
        said = out.stdout + out.stderr
        assert password not in said and token not in said, (what, said)
        assert "Traceback" not in said, (what, said)
    assert outs["config show"].returncode == 0
    assert "postgresql://app:<redacted>@db.internal:5432/sales" in outs["config show"].stdout
    shown = json.loads(outs["config show --json"].stdout)["config"]["mcp"]["pg"]["args"]
    assert shown[2:] == ["postgresql://app:<redacted>@db.internal:5432/sales", "<redacted>"]
    assert "db.internal" in outs["mcp list"].stdout + outs["mcp list"].stderr  # what it connects to, still said
    assert outs["run --mcp"].returncode == 2 and "MCP server pg did not start" in outs["run --mcp"].stderr


def test_a_prompt_in_another_encoding_is_refused_not_sent_mangled(env: dict[str, str], tmp_path: Path) -> None:
    """A prompt typed or pasted in Latin-1 (`tether run "$(cat notes-latin1.txt)"`, a chat fed such
    a file) reached the model with each é as U+FFFD, and the run's saved prompt kept the raw byte:
    `tether runs --json` then wrote bytes that are not UTF-8, which no JSON reader takes. `tether
    run -` and `@FILE` already refused such text. Now the argument is refused the same way (exit 2,
    nothing run), and the chat says the line was not sent and goes on with the next one."""
    import subprocess

    workspace = tmp_path / "ws"
    workspace.mkdir()
    latin1 = "café au lait".encode("latin-1")
    out = subprocess.run(
        ["tether", "run", "--model", "scripted/hello", "--cwd", str(workspace), b"order a " + latin1],
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert b"not UTF-8" in out.stderr and b"Traceback" not in out.stderr, out.stderr

    chat = subprocess.run(
        ["tether", "chat", "--model", "scripted/hello", "--cwd", str(workspace)],
        env=env,
        capture_output=True,
        input=b"order a " + latin1 + b"\norder a tea\n",
        timeout=60,
    )
    assert chat.returncode == 0, chat.stderr
    assert b"not UTF-8" in chat.stderr and b"nothing was sent" in chat.stderr, chat.stderr
    listing = subprocess.run(["tether", "runs", "--json"], env=env, capture_output=True, timeout=60)
    runs = json.loads(listing.stdout.decode("utf-8"))  # UTF-8 JSON, as every --json listing
    assert [r["prompt"] for r in runs] == ["order a tea"]  # the chat's next line only; the refused one never ran


def test_memory_scope_and_no_memory_together_are_a_usage_error(env: dict[str, str], tmp_path: Path) -> None:
    """`--memory-scope user|project | --no-memory` (docs/cli.md): given both, `tether run` ran without
    memory and dropped --memory-scope without a word. Now the two together are a usage error (exit 2,
    nothing run), as argparse says of any two options that exclude each other."""
    for command in (["run"], ["chat"]):
        out = tether(
            *command,
            "--model",
            "scripted/hello",
            "--cwd",
            str(tmp_path),
            "--memory-scope",
            "project",
            "--no-memory",
            *(["hi"] if command == ["run"] else []),
            env=env,
        )
        assert out.returncode == 2, (command, out.stderr)
        assert "not allowed with argument --memory-scope" in out.stderr, (command, out.stderr)
    assert json.loads(tether("runs", "--json", env=env).stdout) == []  # nothing ran


def test_scripted_serve_announces_the_address_it_listens_on(env: dict[str, str]) -> None:
    """`tether scripted serve --host ADDR` listened on ADDR but announced http://127.0.0.1:PORT/v1
    (and told to set LLM_BASE_URL to it), where nothing listened: every run it was tried with
    failed, 'cannot reach 127.0.0.1'. 127.0.0.2 is this machine's too (all of 127/8 is loopback),
    yet not 127.0.0.1. Now the URL it prints is where it listens (127.0.0.1 for 0.0.0.0)."""
    import subprocess

    import httpx

    proc = subprocess.Popen(
        ["tether", "scripted", "serve", "--host", "127.0.0.2", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = (proc.stdout.readline() if proc.stdout else "").strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.2:") and url.endswith("/v1"), url
        assert httpx.get(url + "/models").json()["object"] == "list"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_stdout_on_a_full_disk_is_one_line_and_the_run_is_kept(env: dict[str, str], tmp_path: Path) -> None:
    """`tether run ... > answer.txt` with the disk full (here /dev/full, where every write fails with
    ENOSPC) printed Python's traceback, and the run was saved as cut by 'the caller stopped reading
    the run's events'; `tether runs > list.txt` and the other listings printed a traceback too.
    docs/cli.md: a problem of the machine is one line, not a traceback. Now the run stops as when
    stdout's reader leaves (saved, resumable, the summary line and the resume hint on stderr) and
    says stdout could not be written, exit code 1; a listing says it in one line, exit code 1."""
    import subprocess

    workspace = tmp_path / "ws"
    workspace.mkdir()
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            ["tether", "run", "--model", "scripted/hello", "--cwd", str(workspace), "hi"],
            env=env,
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
        )
        listings = [
            subprocess.run(["tether", *argv], env=env, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
            for argv in (["runs"], ["runs", "--json"], ["show", "last"], ["config", "show"])
        ]
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "stdout could not be written (No space left on device)" in run.stderr, run.stderr
    assert "tether resume run_" in run.stderr
    for out in listings:
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith("tether: cannot write: No space left on device"), out.stderr
    (row,) = json.loads(tether("runs", "--json", env=env).stdout)
    assert row["status"] == "interrupted"  # kept, resumable
    resumed = tether("resume", row["run_id"], env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("Hello!")


def test_a_chat_whose_stdout_cannot_be_written_ends_instead_of_answering_into_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    """`tether chat > log.txt` on a full disk: the first reply was cut (stdout could not be written),
    then the chat went on and answered every next message into the null device, each run
    'completed' and paid, none seen, exit code 0. Now the chat ends there, exit code 1, with the
    cut run resumable; the next lines are never sent."""
    import subprocess

    workspace = tmp_path / "ws"
    workspace.mkdir()
    with open("/dev/full", "w") as full:
        chat = subprocess.run(
            ["tether", "chat", "--model", "scripted/hello", "--cwd", str(workspace)],
            env=env,
            input="hi\nagain\nthird\n",
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert chat.returncode == 1, chat.stderr
    assert "stdout could not be written" in chat.stderr and "Traceback" not in chat.stderr, chat.stderr
    runs = json.loads(tether("runs", "--json", env=env).stdout)
    assert [(r["prompt"], r["status"]) for r in runs] == [("hi", "interrupted")]


_AFTER_THE_COMMAND = """
import os, signal, sys
sys.argv = ["tether", "run", "--model", "scripted/hello", "--cwd", sys.argv[1], "hi"]
from tether.cli import main
code = main()
os.kill(os.getpid(), signal.SIGTERM)  # `kill` as the command ends: its run completed, its answer printed
sys.exit(code)
"""


def test_sigterm_as_the_command_ends_keeps_its_exit_code(env: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM that came once `tether run` had completed and printed its summary, as the command
    returned, raised Terminated outside every handler: a traceback and exit code 1 for a run that
    completed (and during the interpreter's last 0.2 s, the signal's default: exit 143). Now the
    command's exit code stands: the process leaves at once with it."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _AFTER_THE_COMMAND, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Hello!") and "[completed]" in out.stderr
