"""tether.cli.mcp: ``tether mcp list`` and ``tether mcp login``, ``tether run --mcp``, and the
worked example (examples/mcp/mail_server.py) driven by the scripted ``mcp`` scenario: the agent
reads the inbox, waits for approval before ``send_email``, and sends exactly once.

Commands run in process (``tether.cli.main``), with ``TETHER_HOME`` in a temporary directory."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.conftest import INVENTORY, running_in, tether
from tether.harness.store import RunStore

ROOT = Path(__file__).resolve().parents[2]


def configure(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def test_mcp_list_tries_each_server_and_shows_its_tools_with_their_approval(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(
        home,
        f"""
[mcp.inventory]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(INVENTORY))}]
env = {{ INVENTORY_LOG = {json.dumps(str(tmp_path / "calls.log"))} }}
tools = {{ reorder = "always", set_note = "never", restock = "never" }}
cache = ["stock"]

[mcp.broken]
command = {json.dumps(sys.executable)}
args = ["-c", "import sys; sys.exit('the server needs STOCK_DB')"]

[mcp.remote]
url = "http://127.0.0.1:9/mcp"
enabled = false
""",
    )
    code, out, _ = tether(capsys, "mcp", "list")
    assert code == 1  # a configured server does not work
    blocks = {b.split()[0]: b.splitlines() for b in out.split("\n") if b and not b.startswith(" ")}
    assert blocks == {
        "inventory": [blocks["inventory"][0]],
        "broken": [blocks["broken"][0]],
        "remote": ["remote  http  http://127.0.0.1:9/mcp"],
    }
    lines = out.splitlines()
    assert lines[0] == f"inventory  stdio  {sys.executable} {INVENTORY}"
    assert lines[1] == "  ok: 14 tools"
    shown = {line.split()[0]: line.split(None, 1)[1] for line in lines[2:16]}
    assert shown["inventory__stock"] == "read-only: runs without asking; answers reused in a run (cache)"
    assert shown["inventory__photo"] == "read-only: runs without asking"
    assert shown["inventory__crash"] == "asks first (destructive)"
    assert shown["inventory__reorder"] == 'asks first (tools.reorder = "always")'
    assert shown["inventory__set_note"] == 'runs without asking (tools.set_note = "never")'
    assert lines[16] == "  [mcp.inventory] tools names restock: the server has no such tool"
    assert lines[18] == (
        "  not working: MCP server broken did not start: the process exited with status 1 "
        "(its last words: the server needs STOCK_DB)"
    )
    assert lines[20] == "  disabled (enabled = false)"


def test_mcp_list_says_which_tools_were_left_out_or_trimmed_and_why(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(
        home,
        f"""
[mcp.inventory]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(INVENTORY))}]
env = {{ INVENTORY_LOG = {json.dumps(str(tmp_path / "calls.log"))} }}
max_description_chars = 20
max_schema_chars = 140
""",
    )
    code, out, _ = tether(capsys, "mcp", "list")
    assert code == 0
    left_out = [line for line in out.splitlines() if line.startswith("  left out: ")]
    trimmed = [line for line in out.splitlines() if line.startswith("  trimmed: ")]
    assert "  left out: reorder: its input schema has " in "\n".join(left_out)
    assert all("more than max_schema_chars (140)" in line for line in left_out)
    assert "  trimmed: stock: description trimmed from 32 to 20 characters" in trimmed


def test_mcp_login_stores_the_tokens_of_an_oauth_server_readable_only_by_its_owner(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(
        home,
        '[mcp.remote]\nurl = "https://mcp.example.com/mcp"\nauth = "oauth"\n'
        'token_url = "https://auth.example.com/token"\n\n[mcp.plain]\nurl = "https://x.example.com/mcp"\n',
    )
    code, _, err = tether(
        capsys, "mcp", "login", "remote", "--refresh-token", "r-1", "--access-token", "a-1", "--expires-in", "600"
    )
    path = home / "auth" / "mcp-remote.json"
    assert code == 0 and str(path) in err and "r-1" not in err
    tokens = json.loads(path.read_text())
    assert tokens["refresh_token"] == "r-1" and tokens["access_token"] == "a-1" and tokens["expires_at"] > 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    code, _, err = tether(capsys, "mcp", "login", "plain", "--refresh-token", "r-1")
    assert code == 2 and 'auth = "none"' in err
    code, _, err = tether(capsys, "mcp", "login", "nope", "--refresh-token", "r-1")
    assert code == 2 and "no [mcp.nope]" in err


OAUTH_SERVER = (
    '[mcp.remote]\nurl = "https://mcp.example.com/mcp"\nauth = "oauth"\ntoken_url = "https://auth.example.com/token"\n'
)


@dataclass(frozen=True)
class Login:
    """A command that stores OAuth tokens, taking the refresh token from stdin or the environment."""

    config: str
    command: tuple[str, ...]
    file: str  # under $TETHER_HOME/auth
    refresh_env: str
    access_env: str


LOGINS = {
    "mcp login": Login(
        OAUTH_SERVER,
        ("mcp", "login", "remote"),
        "mcp-remote.json",
        "TETHER_MCP_REFRESH_TOKEN",
        "TETHER_MCP_ACCESS_TOKEN",
    ),
    "auth import": Login(
        '[endpoints.corp]\nkind = "openai"\nbase_url = "https://llm.example.com/v1"\n'
        'auth = "oauth"\ntoken_url = "https://auth.example.com/token"\n',
        ("auth", "import", "corp"),
        "corp.json",
        "TETHER_REFRESH_TOKEN",
        "TETHER_ACCESS_TOKEN",
    ),
}


def stored(home: Path, login: Login = LOGINS["mcp login"]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "auth" / login.file).read_text())
    return data


@pytest.mark.parametrize("login", LOGINS.values(), ids=LOGINS.keys())
def test_the_refresh_token_is_read_from_stdin_with_a_dash(
    login: Login, home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(home, login.config)
    monkeypatch.setenv(login.refresh_env, "from-the-environment")  # a dash means stdin, even so
    monkeypatch.setattr(sys, "stdin", io.StringIO("r-from-stdin\n"))
    code, out, err = tether(capsys, *login.command, "--refresh-token", "-")
    assert code == 0 and "r-from-stdin" not in out + err
    assert stored(home, login)["refresh_token"] == "r-from-stdin" and stored(home, login)["access_token"] == ""
    assert stat.S_IMODE(os.stat(home / "auth" / login.file).st_mode) == 0o600

    for given in ("", "  \n", "two words\n"):
        monkeypatch.setattr(sys, "stdin", io.StringIO(given))
        code, out, err = tether(capsys, *login.command, "--refresh-token", "-")
        assert code == 2 and "--refresh-token -: stdin" in err and "two" not in err
    assert stored(home, login)["refresh_token"] == "r-from-stdin"  # a refused login changed nothing


@pytest.mark.parametrize("login", LOGINS.values(), ids=LOGINS.keys())
def test_the_tokens_are_read_from_the_environment_when_no_flag_gives_them(
    login: Login, home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(home, login.config)
    monkeypatch.delenv(login.refresh_env, raising=False)
    monkeypatch.delenv(login.access_env, raising=False)
    code, _, err = tether(capsys, *login.command)
    assert code == 2 and "--refresh-token -" in err and login.refresh_env in err
    assert not (home / "auth" / login.file).exists()

    monkeypatch.setenv(login.refresh_env, "r-env\n")
    monkeypatch.setenv(login.access_env, "a-env")
    code, out, err = tether(capsys, *login.command, "--expires-in", "600")
    assert code == 0 and "r-env" not in out + err and "a-env" not in out + err
    tokens = stored(home, login)
    assert tokens["refresh_token"] == "r-env" and tokens["access_token"] == "a-env" and tokens["expires_at"] > 0

    code, _, _ = tether(capsys, *login.command, "--refresh-token", "r-flag")  # a flag wins
    assert code == 0 and stored(home, login)["refresh_token"] == "r-flag"


def test_mcp_login_help_recommends_stdin_or_the_environment_over_the_command_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = tether(capsys, "mcp", "login", "--help")
    flat = " ".join(out.split())
    assert code == 0 and "--refresh-token - < token.txt" in flat and "TETHER_MCP_REFRESH_TOKEN=" in flat
    assert "shows in ps" in flat


def test_run_refuses_an_mcp_server_that_is_not_configured_or_disabled(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(home, '[mcp.off]\ncommand = "true"\nenabled = false\n')
    code, _, err = tether(capsys, "run", "--model", "scripted/hello", "--mcp", "nope", "hi")
    assert code == 2 and "--mcp nope: no [mcp.nope]" in err and "(configured: off)" in err
    code, _, err = tether(capsys, "run", "--model", "scripted/hello", "--mcp", "off", "hi")
    assert code == 2 and "[mcp.off] has enabled = false" in err
    code, _, err = tether(capsys, "run", "--model", "scripted/hello", "--mcp", "all", "hi")
    assert code == 2 and "no enabled [mcp.NAME] server" in err
    assert not (home / "runs").exists()  # refused before anything ran


def test_the_mail_example_asks_before_sending_and_sends_exactly_once(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "examples" / "mcp", tmp_path / "examples" / "mcp")
    monkeypatch.chdir(tmp_path)
    configure(
        home,
        f"""
[mcp.mail]
command = {json.dumps(sys.executable)}
args = ["examples/mcp/mail_server.py", "--outbox", "outbox.jsonl"]

[mcp.calendar]
command = "calendar-server"
enabled = false
""",
    )
    outbox = tmp_path / "outbox.jsonl"
    code, out, _ = tether(
        capsys, "run", "--model", "scripted/mcp", "--mcp", "all", "--json", "Answer the latest e-mail."
    )
    result = json.loads(out)
    assert code == 5 and result["status"] == "interrupted"
    assert result["interruption"] == {
        "type": "approval",
        "call_id": "c2",
        "tool_name": "mail__send_email",
        "args": {
            "to": "ana@example.com",
            "subject": "Re: Order 1042 is late",
            "body": "Thank you for writing. We are looking into it and will write again within a day.",
        },
        "together": [],
    }
    assert not outbox.exists()  # nothing is sent before a person says yes
    saved = RunStore(home / "runs").load(result["run_id"])
    assert saved.config["mcp"] == ["mail"]  # `all`, as it was when the run began: a resume keeps it

    code, out, _ = tether(capsys, "resume", result["run_id"], "--approve", "--json")
    done = json.loads(out)
    assert code == 0 and done["status"] == "completed"
    assert done["output"] == (
        "I answered ana@example.com about 'Order 1042 is late'. The mail server says: Sent to "
        "ana@example.com: 'Re: Order 1042 is late' (message 1 in outbox.jsonl)."
    )
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert [(m["to"], m["subject"]) for m in sent] == [("ana@example.com", "Re: Order 1042 is late")]
    assert running_in(tmp_path, "mail_server.py") == []  # both runs stopped their server
