"""The README and the docs as a demanding new user meets them, attacked a fifth time: what `tether
config check` calls ok, what the commands say about a slip a newcomer makes (a misspelt model, tool
or key), and whether the help and the pages say what the commands do. Each test runs ``tether`` in
process with its own ``TETHER_HOME``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import quiet_env, run_main
from tether.testing import ScriptedServer

__all__ = ["quiet_env"]  # the fixture, used by name below


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[agents.support]\nmodel = "nosuch/x"\n', ["[agents.support] model", "unknown provider 'nosuch'"]),
        ('[agents.support]\nmodel = "scripted/nosuch"\n', ["[agents.support] model", "unknown scripted scenario"]),
        ('model = "nosuch/x"\n', ["model", "unknown provider 'nosuch'"]),
        ('model = "llama3"\n', ["model", "cannot tell which provider serves 'llama3'"]),
        ('model = "scripted/plan"\nfallback_models = ["nosuch/y"]\n', ["fallback_models", "'nosuch/y'"]),
        (
            '[agents.support]\nmodel = "scripted/plan"\ntools = ["read_fil"]\n',
            ["[agents.support] tools", "read_fil", "read_file"],
        ),
        ('[agents.support]\nmodel = "scripted/plan"\nmcp = ["mail"]\n', ["[agents.support] mcp", "no [mcp.mail]"]),
        (
            'model = "local/qwen2.5"\n[endpoints.local]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-abc def"\n',
            ["model: api_key in [endpoints.local]", "a character an HTTP header cannot carry"],
        ),
    ],
)
def test_config_check_refuses_what_every_run_of_the_agent_would_refuse(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], text: str, said: list[str]
) -> None:
    """README: "`tether config check` says whether the file loads", then `tether run --agent support`.
    Was: `ok` for a model no provider serves, a tool or MCP server that does not exist; every run of
    the agent (and every message to `tether serve`) then failed on it."""
    _config(quiet_env, text)
    code, out, err = run_main("config", "check", capsys=capsys)
    assert code == 2, (out, err)
    assert not out.startswith("ok"), out
    assert all(s in err for s in said), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_config_check_refuses_a_tether_model_no_provider_serves(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TETHER_MODEL` wins over the file's `model` (docs/providers.md), so a run uses it: `config
    check`, which shows it among the overrides, was `ok` with it naming no provider."""
    monkeypatch.setenv("TETHER_MODEL", "scripted/nosuch")
    code, out, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and err.startswith("tether: $TETHER_MODEL: unknown scripted scenario 'nosuch'"), (out, err)


def test_config_check_still_passes_a_config_that_only_lacks_a_key(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key missing from the environment is not the file's mistake: the file is fine."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _config(
        quiet_env,
        'model = "gpt-4.1-mini"\nfallback_models = ["anthropic/claude-haiku-4-5"]\n'
        '[endpoints.local]\nbase_url = "http://127.0.0.1:9/v1"\nkey_env = "LOCAL_KEY_UNSET"\n'
        '[agents.support]\nmodel = "local/qwen2.5"\ntools = ["read_file", "scan_archive"]\n',
    )
    code, out, err = run_main("config", "check", capsys=capsys)
    assert code == 0 and out.startswith("ok: "), (out, err)


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("scripted/nosuch", "unknown scripted scenario 'nosuch'"),
        ("nosuch/x", "unknown provider 'nosuch'"),
        ("openai/gpt-4.1-mini", "OPENAI_API_KEY is not set"),
    ],
)
def test_serve_refuses_a_model_it_cannot_run_before_it_listens(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, model: str, said: str
) -> None:
    """`tether run --model M` says at once that M cannot run. Was: `tether serve --model M` listened,
    served the page, and failed every message with the same error."""
    pytest.importorskip("fastapi", reason="tether serve needs the serve extra")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = run_main("serve", "--model", model, "--port", "0", capsys=capsys)
    assert code == 2, (out, err)
    assert "listening" not in err and said in err and "agent 'default'" in err, err
    assert len(err.strip().splitlines()) == 1, err


GUARDED = '[agents.support]\nmodel = "scripted/plan"\n[[agents.support.guardrails]]\nname = "x"\n'


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            GUARDED + "rule = []\n",
            "rule is not a known setting in [agents.support] guardrails[0] (did you mean rules?)",
        ),
        (
            GUARDED + 'rules = [{ patern = "x" }]\n',
            "patern is not a known setting in [agents.support] guardrails[0].rules[0] (did you mean pattern?)",
        ),
        (GUARDED + "rules = [{ score = 0.1 }]\n", "[agents.support] guardrails[0].rules[0] needs pattern"),
        (
            "max_turns = 8\n",
            "max_turns is not a known setting at the top of the file (it is a setting of [agents.NAME])",
        ),
        (
            '[serve]\nmodel = "scripted/plan"\n',
            "model is not a known setting in [serve] (it is a setting of [agents.NAME])",
        ),
        ('base_url = "http://127.0.0.1:11434/v1"\n', "(it is a setting of [endpoints.NAME] and [kb])"),
        (
            'api_key = "sk-x"\n',
            "(it is a setting of [endpoints.NAME]; OpenAI's and Anthropic's keys go in OPENAI_API_KEY",
        ),
        (
            '[endpoints.local]\nbas_url = "http://127.0.0.1:9/v1"\n',
            "bas_url is not a known setting in [endpoints.local] (did you mean base_url?)",
        ),
    ],
)
def test_a_slip_in_config_toml_names_its_table_and_where_the_key_belongs(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    """docs/cli.md: a key tether does not know stops the command with "one line naming the file, the
    key, what is wrong and the fix". Was: `rule` in [[agents.support.guardrails]] was "not a known
    setting in [agents.support]", offered the agent's keys (no `rules` among them), a rule without
    its pattern said "[agents.support] needs pattern"; `max_turns = 8` at the top listed the top's
    keys, `base_url` there asked "did you mean database_url?", not where either belongs."""
    _config(quiet_env, text)
    code, _, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and said in err, err


def test_a_prompt_of_several_words_without_quotes_says_to_quote_it(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first thing a newcomer types after the README's line. Was: `usage: tether [-h] [--version]
    {run,resume} ...` and "unrecognized arguments: file mentions a timeout", with no word of quotes
    (and a usage line naming two commands, not the one typed)."""
    code, out, err = run_main(
        "run", "--model", "scripted/hello", "Which", "file", "mentions", "a", "timeout", capsys=capsys
    )
    assert code == 2 and out == "", (out, err)
    assert "usage: tether run " in err and "{run,resume}" not in err, err
    assert "unrecognized arguments: file mentions a timeout" in err, err
    assert '"Which file mentions a timeout"' in err, err


def test_a_misspelt_option_is_named_with_the_option_meant(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tether rnu` gets "did you mean 'run'?"; `--modle` got nothing but the whole usage of
    `tether {run,resume}`."""
    code, _, err = run_main("run", "--modle", "scripted/hello", "hi", capsys=capsys)
    assert code == 2 and "usage: tether run " in err and "did you mean --model?" in err, err
    code, _, err = run_main("runs", "--jsno", capsys=capsys)
    assert code == 2 and "usage: tether runs " in err and "did you mean --json?" in err, err
    code, _, err = run_main("config", "show", "--jsn", capsys=capsys)
    assert code == 2 and "usage: tether config show " in err and "did you mean --json?" in err, err


def test_models_with_llm_base_url_at_nothing_says_so_once_without_the_catalogue(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md: a provider that points at a server is asked for its own models "instead of
    tether's catalogue". Was: with the server down, OpenAI's whole catalogue (gpt-4.1, o3, ...) was
    listed against the local server, each line "cannot reach H: openai: cannot reach H (...)"."""
    import socket

    with socket.socket() as closed:  # bound, never listening: a connection to it is refused
        closed.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{closed.getsockname()[1]}"
        monkeypatch.setenv("LLM_BASE_URL", f"http://{host}/v1")
        code, out, err = run_main("models", capsys=capsys)
    openai = [line for line in out.splitlines() if line.startswith("openai/")]
    assert code == 1, (out, err)
    assert len(openai) == 1 and openai[0].startswith("openai/*"), out
    assert f"cannot reach {host}" in openai[0] and openai[0].count("cannot reach") == 1, openai
    assert "gpt-4.1" not in out and "scripted/plan" in out, out


def test_a_misspelt_model_the_server_refuses_is_named_not_priced(
    quiet_env: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scripted_server: ScriptedServer,
    workspace: Path,
) -> None:
    """`--model openai/gpt-4.1-mimi`: the server refuses the name, nothing is spent. Was: the summary
    line said "cost unknown (no price for openai/gpt-4.1-mimi; add one under [models."openai/gpt-4.1-
    mimi"] in config.toml)", sending the person to price a model that does not exist, with no word
    of the name they meant."""
    monkeypatch.setenv("LLM_BASE_URL", scripted_server.base_url)
    argv = ("run", "--model", "openai/gpt-4.1-mimi", "--cwd", str(workspace), "hi")
    code, out, err = run_main(*argv, capsys=capsys)
    assert code == 1 and out == "", (out, err)
    summary = next(line for line in err.splitlines() if line.startswith("[failed]"))
    assert "turns 0 | tokens 0 | $0.000000 |" in summary and "add one under" not in summary, summary
    assert "did you mean openai/gpt-4.1-mini?" in err, err
    run_id = summary.rsplit(" | ", 1)[-1]
    code, out, _ = run_main("runs", "--limit", "1", capsys=capsys)
    assert code == 0 and run_id in out and "$0.000000" in out and "unknown" not in out, out
    code, out, _ = run_main("show", run_id, capsys=capsys)
    assert code == 0 and "tokens 0, $0.000000" in out.splitlines()[0], out
    # A model that answered without a price still says so: a cost of 0 there is not free.
    code, _, err = run_main("run", "--model", "openai/hello", "--cwd", str(workspace), "hi", capsys=capsys)
    assert code == 0 and 'cost unknown (no price for openai/hello; add one under [models."openai/hello"]' in err, err
    assert "did you mean" not in err, err


def test_the_help_of_tether_scripted_says_what_docs_cli_md_says_it_is(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/cli.md: `tether scripted serve` is "the scripted model as an OpenAI- and Anthropic-compatible
    server". Was: `tether --help` called it "the scripted model's tools", its serve "an OpenAI-compatible
    API", with no word of the Anthropic wire or of the model names it answers to."""
    code, out, _ = run_main("--help", capsys=capsys)
    line = next(x for x in out.splitlines() if x.strip().startswith("scripted "))
    assert code == 0 and "Anthropic" in line and "tools" not in line, line
    code, out, _ = run_main("scripted", "serve", "--help", capsys=capsys)
    out = " ".join(out.split())  # as argparse wraps it
    assert code == 0 and "Anthropic Messages" in out and "openai/plan" in out, out
    assert "address to listen on" in out, out


def test_the_synopsis_of_docs_cli_md_names_every_command_option_and_subcommand() -> None:
    """docs/cli.md opens with every command; a newcomer reads it as the list. Was: `tether chat`
    without --kb, --mcp, --no-memory, --no-skills; `tether mcp` without resources, prompts and serve
    (which the README uses); `tether serve` without --workers; `tether worker` without --model, --cwd
    and --name; `tether kb` without fill, list, remove, stats, drop."""
    import argparse
    import re

    from tether.cli import build_parser

    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    synopsis = doc.split("```text", 1)[1].split("```", 1)[0].splitlines()

    def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(found[0].choices) if found else {}

    missing: list[str] = []
    for name, parser in commands(build_parser()).items():
        lines, on = [], False
        for line in synopsis:  # the command's lines, its continuation lines with them
            on = line.split()[1] == name if line.startswith("tether ") else on
            lines += [line] if on else []
        text = "\n".join(lines)
        options = [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
        missing += [f"{name} {o}" for o in options if not re.search(re.escape(o) + r"(?![\w-])", text)]
        missing += [f"{name} {c}" for c in commands(parser) if not re.search(rf"\b{re.escape(c)}\b", text)]
    assert not missing, missing


def test_the_readmes_list_of_the_documentation_names_every_page() -> None:
    """README: "The rest of the documentation: ..." is where a newcomer looks for a page. Was: no
    providers.md (where keys, base URLs and local servers are explained), harness.md, tools.md,
    sessions.md or testing.md in it."""
    import re

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    listed = readme.split("The rest of the documentation:", 1)[1].split("\n\n", 1)[0]
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", listed))
    pages = {p.name for p in (root / "docs").glob("*.md")} - {"architecture.md"}  # linked on the next line
    assert pages <= linked, sorted(pages - linked)
    assert "docs/architecture.md" in readme.split("The rest of the documentation:", 1)[1][:2000]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "model = scripted/plan\n",
            'line 1, column 9): model = scripted/plan (a text goes in quotes: model = "scripted/plan")',
        ),
        ("[skills]\nenabled = True\n", "enabled = True (true and false are written in lower case: enabled = true)"),
        ('model: "scripted/plan"\n', 'after a key in a key/value pair (at line 1, column 6): model: "scripted/plan"'),
        ("max_budget_usd = $0.5\n", "(at line 1, column 18): max_budget_usd = $0.5. Fix"),
    ],
)
def test_a_toml_slip_shows_its_line_and_how_to_write_it(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    """The commonest first slip in config.toml, a value without its quotes. Was: "Invalid value (at
    line 1, column 9). Fix or remove the file.", neither the line nor what is invalid about it."""
    _config(quiet_env, text)
    code, _, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and said in err, err


@pytest.mark.parametrize(
    "text",
    [
        '[endpoints.local]\nbase_url = "http://x/v1"\napi_key = sk-live-12345\n',
        '[mcp.mail]\ncommand = "x"\nenv = { TOKEN = sk-live-12345 }\n',
        "database_url = postgresql://u:sk-live-12345@db/x\n",
        '[mcp.mail]\ncommand = "x"\nargs = ["--api-key",\n  sk-live-12345]\n',
    ],
)
def test_a_toml_slip_on_a_line_that_may_hold_a_secret_does_not_show_it(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    _config(quiet_env, text)
    code, _, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and "Invalid value" in err and "sk-live-12345" not in err, err


def test_models_asks_an_endpoint_that_lists_no_models_for_its_own(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], scripted_server: ScriptedServer
) -> None:
    """docs/cli.md: a provider that points at a server, "an endpoint in config.toml", is asked for its
    own models. Was: an [endpoints.NAME] without `models = [...]` (docs/providers.md marks it
    optional) was not in `tether models` at all, so whether it answers could not be seen."""
    _config(quiet_env, f'[endpoints.local]\nbase_url = "{scripted_server.base_url}"\n')
    code, out, err = run_main("models", capsys=capsys)
    assert code == 0, (out, err)
    assert any(line.startswith("local/plan ") and line.endswith("ok (served)") for line in out.splitlines()), out


def test_serve_refuses_model_and_cwd_it_would_drop(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    """`--model` and `--cwd` are "the default agent's" (tether serve --help); with [agents.NAME] in
    config.toml or --agent FILE there is no default agent. Was: the server started with the tables'
    models and folders, the flags dropped without a word (the README says flags override the
    definition)."""
    pytest.importorskip("fastapi", reason="tether serve needs the serve extra")
    _config(quiet_env, '[agents.support]\nmodel = "scripted/plan"\n')
    code, _, err = run_main("serve", "--model", "scripted/hello", "--port", "0", capsys=capsys)
    assert code == 2 and "--model is for tether serve's default agent" in err and "(support)" in err, err
    (quiet_env / "config.toml").unlink()
    agents = Path(__file__).resolve().parents[1] / "examples" / "serve_agents.py"
    code, _, err = run_main("serve", "--agent", str(agents), "--cwd", str(workspace), "--port", "0", capsys=capsys)
    assert code == 2 and "--cwd is for tether serve's default agent" in err and "serve_agents.py" in err, err


@pytest.mark.parametrize(
    ("model", "said"),
    [("openai/gpt-4.1-mini", "OPENAI_API_KEY is not set"), ("scripted/nosuch", "unknown scripted scenario")],
)
def test_chat_says_a_model_cannot_run_before_the_first_message(
    quiet_env: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    workspace: Path,
    model: str,
    said: str,
) -> None:
    """`tether run` says a missing key "before anything else". Was: `tether chat` opened, showed its
    banner and `you> `, took the person's first message, and only then ended on the missing key."""
    import io

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("a message typed for nothing\n"))
    code, out, err = run_main("chat", "--model", model, "--cwd", str(workspace), capsys=capsys)
    assert code == 2 and said in err, err
    assert "you> " not in err + out and "tether chat:" not in err, err


@pytest.mark.parametrize("agent", ["examples/serve_agents.py", "serve_agents.py"])
def test_run_agent_given_a_python_file_says_what_agent_names_here(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    """`tether serve --agent examples/serve_agents.py` is in the README; the same --agent to `tether run`
    said "define [agents.examples/serve_agents.py] in config.toml", a table no config can hold."""
    code, _, err = run_main("run", "--agent", agent, "hi", capsys=capsys)
    assert code == 2 and "[agents.NAME] table" in err and "for tether serve" in err, err
    assert f"[agents.{agent}]" not in err, err


def test_every_command_and_option_of_the_help_says_what_it_is() -> None:
    """`tether CMD --help` is where a newcomer looks first. Was: `tether kb search --mode` (which the
    README uses: `--mode exact`) listed six modes with no word of what any does."""
    import argparse

    from tether.cli import build_parser

    unexplained: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                unexplained.extend(f"{path} {name}" for name in action.choices if name not in helped)
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif action.option_strings and action.dest != "help" and not action.help:
                unexplained.append(f"{path} {action.option_strings[-1]}")

    walk(build_parser(), "tether")
    assert not unexplained, unexplained


def test_worker_refuses_a_model_it_cannot_run_before_it_takes_a_job(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `tether serve`: a worker on a machine without the key took runs from the queue and failed
    each one. Now it stops at once, before it connects to anything (the URLs here lead nowhere)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("TETHER_DATABASE_URL", "postgresql://u@127.0.0.1:1/x")
    monkeypatch.setenv("TETHER_BROKER_URL", "amqp://u:p@127.0.0.1:1//")
    code, _, err = run_main("worker", "--model", "openai/gpt-4.1-mini", capsys=capsys)
    assert code == 2 and "agent 'default' cannot run: OPENAI_API_KEY is not set" in err, err
