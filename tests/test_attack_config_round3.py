"""config.toml and how the assembly reads it, attacked from outside (a helper's third round): a
link that leads nowhere, a $TETHER_HOME that is a file, secrets in the one-line errors, a key put
where its variable's name goes, ``~user`` paths and a named pipe where a schema file should be."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.config import load_settings
from tether.errors import ConfigError

SECRET = "sk-SECRET0123456789abcdef"


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refused(home: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(home)
    return str(caught.value)


def tether(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "LLM_BASE_URL", "OPENAI_BASE_URL")}
    return subprocess.run(
        ["tether", *args],
        env={**env, "TETHER_HOME": str(home)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


# --- a config.toml that is there but cannot be read -----------------------------------------------


@pytest.mark.parametrize("target", ["dotfiles/tether.toml", "config.toml"], ids=["dangling", "loop"])
def test_a_link_at_config_toml_that_leads_nowhere_is_an_error_not_the_defaults(tmp_path: Path, target: str) -> None:
    """A dotfiles link whose file moved (or a link to itself): the person's settings (their model,
    their approvals) would silently not apply. Before: every command ran on the defaults and
    `tether config check` said the file does not exist."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").symlink_to(home / target)
    said = refused(home)
    assert said.startswith(f"{home / 'config.toml'}: ") and "symbolic link" in said and "\n" not in said
    out = tether("config", "check", home=home)
    assert out.returncode == 2 and "symbolic link" in out.stderr and "Traceback" not in out.stderr
    assert "does not exist" not in out.stdout


@pytest.mark.parametrize("what", ["file", "dangling", "loop"])
def test_a_tether_home_that_is_no_folder_is_said_by_config_check(tmp_path: Path, what: str) -> None:
    """Before: `tether config check` said "ok: .../config.toml does not exist" while every command
    that keeps anything refused to run."""
    home = tmp_path / "home"
    if what == "file":
        home.write_text("not a folder\n")
    else:
        home.symlink_to(tmp_path / "gone" if what == "dangling" else home)
    with pytest.raises(ConfigError, match="is a file, not a folder" if what == "file" else "leads to no folder"):
        load_settings(home)
    out = tether("config", "check", home=home)
    assert out.returncode == 2 and not out.stdout.startswith("ok")
    assert f"{home}" in out.stderr and "TETHER_HOME" in out.stderr and "Traceback" not in out.stderr


# --- secrets never in an error --------------------------------------------------------------------

LEAKS = [
    ("[telemetry]\nheaders = 'Authorization: Bearer {s}'\n", "[telemetry] headers must be a table"),
    ("[mcp.mail]\ncommand = 'mail-mcp'\nenv = 'MAIL_TOKEN={s}'\n", "[mcp.mail] env must be a table"),
    ("[mcp.mail]\nurl = 'http://h/mcp'\nheaders = {{ Authorization = ['{s}'] }}\n", "[mcp.mail] headers.Authorization"),
    ("[tools.shell]\nenv = {{ GITHUB_TOKEN = ['{s}'] }}\n", "[tools.shell] env.GITHUB_TOKEN must be a string"),
    ("[endpoints.x]\nbase_url = 'http://h/v1'\napi_key = ['{s}']\n", "[endpoints.x] api_key must be a string"),
    ("[telemetry]\notlp_endpoint = 'ftp://tether:{s}@collector/v1/traces'\n", "otlp_endpoint must be an http"),
    ("[endpoints.x]\nbase_url = 'http://h/v1'\nkey_env = '{s}'\n", "[endpoints.x] key_env must be the name of"),
    # the key pasted as the value of auth (which says how to authenticate, not with what)
    ("[endpoints.x]\nbase_url = 'http://h/v1'\nauth = '{s}'\n", '[endpoints.x] auth must be "key", "none" or "oauth"'),
    ("[mcp.x]\nurl = 'http://h/mcp'\nauth = 'Bearer {s}'\n", '[mcp.x] auth must be "none" or "oauth"'),
]


@pytest.mark.parametrize(("text", "message"), LEAKS, ids=[m for _, m in LEAKS])
def test_a_config_mistake_never_prints_a_secret(tmp_path: Path, text: str, message: str) -> None:
    """A key put in the wrong shape is still a key: the one-line error names the setting and what
    is wrong, never the value (tether config show redacts these same values). Before: the line
    ended `, not "Authorization: Bearer sk-..."`, on a terminal, in CI logs."""
    write(tmp_path, text.format(s=SECRET))
    said = refused(tmp_path)
    assert message in said and "\n" not in said, said
    assert SECRET not in said and SECRET[:12] not in said, said


def test_a_key_put_in_key_env_is_refused_before_it_is_printed_as_a_variable_name(tmp_path: Path) -> None:
    """`key_env = "sk-..."` (the key where the variable's name goes) is a common slip. Before: the
    config loaded, and the first run said `sk-... is not set (named by key_env ...)`."""
    write(tmp_path, f"[endpoints.x]\nbase_url = 'http://127.0.0.1:9/v1'\nkey_env = '{SECRET}'\nmodels = ['m']\n")
    out = tether("run", "--model", "x/m", "hi", home=tmp_path)
    assert out.returncode == 2, out.stderr
    assert SECRET not in out.stderr + out.stdout and "key_env" in out.stderr and "api_key" in out.stderr
    write(tmp_path, "[endpoints.x]\nbase_url = 'http://127.0.0.1:9/v1'\nkey_env = 'LOCAL_API_KEY'\n")
    assert load_settings(tmp_path).endpoints["x"].key_env == "LOCAL_API_KEY"


def test_config_show_redacts_a_secret_table_written_as_a_string(tmp_path: Path) -> None:
    """`env` and `headers` are redacted whole; written (wrongly) as one string, the string is the
    secret. Before: tether config show printed it."""
    write(tmp_path, f"[mcp.mail]\ncommand = 'mail-mcp'\nenv = 'MAIL_TOKEN={SECRET}'\n")
    out = tether("config", "show", home=tmp_path)
    assert out.returncode == 0 and SECRET not in out.stdout and "<redacted>" in out.stdout, out.stdout


# --- paths in config.toml -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args", "names", "code"),
    [
        # A skills folder that cannot be used is skipped, and said: the others still load.
        ("[skills]\npaths = ['~no-such-user-x/skills']\n", ("skills", "list"), "[skills] paths", 0),
        (
            "[agents.a]\nmodel = 'scripted/plan'\ncwd = '~no-such-user-x/work'\n",
            ("run", "--agent", "a", "hi"),
            "[agents.a] cwd",
            2,
        ),
        (
            "[agents.a]\nmodel = 'scripted/plan'\noutput_schema = '~no-such-user-x/schema.json'\n",
            ("run", "--agent", "a", "hi"),
            "[agents.a] output_schema",
            2,
        ),
    ],
    ids=["skills-paths", "agent-cwd", "agent-schema"],
)
def test_a_tilde_user_that_does_not_exist_is_one_line_not_a_traceback(
    tmp_path: Path, text: str, args: tuple[str, ...], names: str, code: int
) -> None:
    """`~someone/...` for a user this machine does not have (a config copied from a colleague).
    Before: RuntimeError: Could not determine home directory, as a traceback."""
    write(tmp_path, text)
    out = tether(*args, home=tmp_path, cwd=tmp_path)
    assert "Traceback" not in out.stderr, out.stderr
    assert "~no-such-user-x" in out.stderr and names in out.stderr, out.stderr
    assert out.returncode == code


def returns_within(fn: Callable[[], Any], limit_s: float = 10) -> list[BaseException]:
    """Run ``fn`` in a thread; a hang guard (it must have finished), not a timing."""
    out: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), "it waited on a named pipe"
    return out


def test_a_named_pipe_as_an_agents_output_schema_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """[agents.NAME] output_schema names a file under $TETHER_HOME; a pipe planted there held every
    door that builds the agent (tether run, tether serve) waiting for a writer."""
    from tether.assembly import plan

    write(tmp_path, "[agents.a]\nmodel = 'scripted/plan'\noutput_schema = 'schema.json'\n")
    os.mkfifo(tmp_path / "schema.json")
    settings = load_settings(tmp_path)
    errors = returns_within(lambda: plan(settings, "a"))
    assert len(errors) == 1 and isinstance(errors[0], ConfigError), errors
    assert "schema.json" in str(errors[0]) and "[agents.a] output_schema" in str(errors[0])


def test_a_tether_home_of_a_user_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    """TETHER_HOME=~someone/tether in a shared profile. Before: a traceback from every command."""
    out = tether("config", "path", home=Path("~no-such-user-x/tether"), cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("tether: $TETHER_HOME: ~no-such-user-x/tether: there is no user 'no-such-user-x'")


def test_config_show_redacts_tokens_in_a_servers_arguments_and_in_a_urls_query(tmp_path: Path) -> None:
    """docs/cli.md: config show prints every key, token and password as <redacted>; people paste it
    into bug reports. An MCP server's token is often an argument (`--token X`, `--api-key=X`,
    docker's `-e GITHUB_TOKEN=X`) or in its URL's query. Before: all printed."""
    write(
        tmp_path,
        "[mcp.gh]\ncommand = 'docker'\n"
        f"args = ['run', '-e', 'GITHUB_TOKEN={SECRET}1', 'gh-mcp', '--token', '{SECRET}2', '--api-key={SECRET}3',"
        " '--verbose', 'docs']\n"
        f"[mcp.web]\nurl = 'https://h.example/mcp?team=docs&api_key={SECRET}4&x=1'\n",
    )
    out = tether("config", "show", "--json", home=tmp_path)
    assert out.returncode == 0 and SECRET not in out.stdout, out.stdout
    import json

    shown = json.loads(out.stdout)["config"]["mcp"]
    assert shown["gh"]["args"] == [
        "run",
        "-e",
        "GITHUB_TOKEN=<redacted>",
        "gh-mcp",
        "--token",
        "<redacted>",
        "--api-key=<redacted>",
        "--verbose",
        "docs",
    ]
    assert shown["web"]["url"] == "https://h.example/mcp?team=docs&api_key=<redacted>&x=1"


def test_a_config_toml_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """Notepad's "UTF-8 with BOM": the file looks right, and was refused as `Invalid statement (at
    line 1, column 1)`, which no one can see."""
    (tmp_path / "config.toml").write_bytes(b"\xef\xbb\xbfmodel = 'scripted/plan'\n")
    assert load_settings(tmp_path).model == "scripted/plan"
    out = tether("config", "show", home=tmp_path)
    assert out.returncode == 0 and 'model = "scripted/plan"' in out.stdout, out.stderr


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('[skills]\npaths = ["team", "a\\u0000b"]\n', "[skills] paths[1]"),
        ('[agents.a]\nmodel = "scripted/plan"\ncwd = "a\\u0000b"\n', "[agents.a] cwd"),
        ('session_store = "sqlite:a\\u0000b"\n', "session_store"),
        ('[tools.shell]\nenv = { A = "x\\u0000y" }\n', "[tools.shell] env.A"),
    ],
)
def test_a_nul_character_in_a_setting_is_one_line_naming_it(tmp_path: Path, text: str, names: str) -> None:
    """TOML lets a string hold \\u0000; no path, name or environment value can. Before: a traceback
    (ValueError: embedded null byte) from whichever command first used the setting."""
    write(tmp_path, text)
    said = refused(tmp_path)
    assert said.startswith(f"{tmp_path / 'config.toml'}: {names} ") and "NUL" in said and "\n" not in said, said
    out = tether("skills", "list", home=tmp_path, cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr and names in out.stderr, out.stderr


def test_an_agents_kb_name_that_climbs_out_of_the_kb_folder_is_refused(tmp_path: Path) -> None:
    """[agents.NAME] kb names bases, which are files $TETHER_HOME/kb/NAME.db; `--kb` and `tether kb`
    refuse a name that is no base's. Before: `kb = ["../server"]` opened $TETHER_HOME/server.db (the
    server's records) as a knowledge base and wrote its tables into it."""
    import sqlite3

    (tmp_path / "kb").mkdir()  # there is a base already
    db = tmp_path / "server.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (id TEXT)")
    conn.close()
    before = db.read_bytes()
    write(tmp_path, "[agents.a]\nmodel = 'scripted/plan'\nkb = ['../server']\n")
    out = tether("run", "--agent", "a", "hi", home=tmp_path, cwd=tmp_path)
    assert out.returncode == 2 and "not a knowledge base name: '../server'" in out.stderr, out.stderr
    assert db.read_bytes() == before


def test_config_show_names_the_broker_variable_that_overrides_dispatch_without_its_password(tmp_path: Path) -> None:
    """docs/cli.md: config show prints the variables that override the file. $TETHER_BROKER_URL
    overrides [dispatch] broker_url and was left out (so the file's broker looked like the one used)."""
    write(tmp_path, "[dispatch]\nbroker_url = 'amqp://tether@file-broker//'\n")
    env = {**os.environ, "TETHER_HOME": str(tmp_path), "TETHER_BROKER_URL": f"amqp://tether:{SECRET}@env-broker//"}
    out = subprocess.run(["tether", "config", "show"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and SECRET not in out.stdout, out.stdout
    assert "# $TETHER_BROKER_URL = amqp://tether:<redacted>@env-broker//" in out.stdout, out.stdout


def test_the_repr_of_settings_and_of_an_agent_holds_no_secret(tmp_path: Path) -> None:
    """Settings travel inside every agent; a repr reaches logs, pytest's assertion output and error
    trackers that record a frame's locals. Before: repr(agent) held the endpoint's api_key, the MCP
    server's environment and headers, the shell's env, the broker's and the database's passwords."""
    from tether import Agent

    write(
        tmp_path,
        f"database_url = 'postgresql://tether:{SECRET}0@db/tether'\n"
        f"[endpoints.x]\nbase_url = 'http://h/v1'\napi_key = '{SECRET}1'\nmodels = ['m']\n"
        f"[mcp.m]\nurl = 'http://h/mcp'\nheaders = {{ Authorization = 'Bearer {SECRET}2' }}\n"
        f"[mcp.n]\ncommand = 'n-mcp'\nenv = {{ N_TOKEN = '{SECRET}3' }}\n"
        f"[tools.shell]\nenv = {{ GH_TOKEN = '{SECRET}4' }}\n"
        f"[telemetry]\notlp_endpoint = 'http://h:4318/v1/traces'\nheaders = {{ api-key = '{SECRET}5' }}\n"
        f"[dispatch]\nbroker_url = 'amqp://tether:{SECRET}6@broker//'\n",
    )
    settings = load_settings(tmp_path)
    assert settings.endpoints["x"].api_key == f"{SECRET}1"  # still there to be used
    assert settings.mcp["n"].env == {"N_TOKEN": f"{SECRET}3"}
    for shown in (repr(settings), str(settings), repr(Agent("scripted/plan", settings=settings))):
        assert SECRET not in shown, shown


def test_a_tether_home_that_cannot_be_searched_is_one_line(tmp_path: Path) -> None:
    """A $TETHER_HOME of another user's (mode 0700), or chmod 000 by mistake. Before: a traceback
    (PermissionError from the check whether config.toml exists). Root reads any folder, so as root
    the command runs in a user namespace of its own, where it does not."""
    import shutil

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("model = 'scripted/plan'\n")
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("root reads any folder, and unshare is not installed to run as no one")
        prefix = ["unshare", "-U"]
    home.chmod(0)
    try:
        out = subprocess.run(
            [*prefix, "tether", "config", "check"],
            env={**os.environ, "TETHER_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        home.chmod(0o700)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"tether: cannot read {home / 'config.toml'}: Permission denied"), out.stderr


def test_config_show_hides_a_database_password_that_holds_a_slash(tmp_path: Path) -> None:
    """A generated password often holds a raw '/', which ends a URL's user part for a parser: config
    show printed what followed it (the password's rest), as errors did before (see
    tether.postgres.db.redact, which shares the rule now)."""
    write(tmp_path, f"database_url = 'postgresql://tether:ab/{SECRET}@db.internal:5432/tether'\n")
    out = tether("config", "show", "--json", home=tmp_path)
    assert out.returncode == 0 and SECRET not in out.stdout, out.stdout
    import json

    assert json.loads(out.stdout)["config"]["database_url"] == "postgresql://tether:<redacted>@db.internal:5432/tether"
