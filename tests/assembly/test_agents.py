"""tether.assembly: ``[agents.NAME]`` definitions, a command's overrides, and the agent built from
them (tools, extensions, middleware, limits), checked before anything runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tether.assembly import DEFAULT_INSTRUCTIONS, Overrides, Recipe, build_agent, plan, served_agents
from tether.config import Settings, TelemetryTable, load_settings
from tether.errors import ConfigError
from tether.harness.governors import Governor

ROOT = Path(__file__).resolve().parents[2]


def settings_with(home: Path, text: str) -> Settings:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)
    return load_settings(home)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return Path(shutil.copytree(ROOT / "examples" / "workspace", tmp_path / "workspace"))


def test_a_definition_gives_the_agent_and_flags_override_it(tmp_path: Path, workspace: Path) -> None:
    s = settings_with(
        tmp_path / "home",
        f'[agents.support]\nmodel = "scripted/plan"\ninstructions = "Be brief."\ncwd = "{workspace}"\n'
        'max_turns = 4\nmax_budget_usd = 0.5\ntools = ["read_file"]\nmemory = "off"\nskills = false\n',
    )
    recipe = plan(s, "support")
    assert (recipe.model, recipe.cwd, recipe.max_turns, recipe.max_budget_usd) == (
        "scripted/plan",
        str(workspace),
        4,
        0.5,
    )
    agent = build_agent(s, recipe)
    assert agent.instructions == "Be brief." and [t.name for t in agent.tools] == ["read_file"]
    assert agent.extensions == [] and agent.max_turns == 4
    changed = plan(s, "support", Overrides(model="scripted/repeat", max_turns=9, cwd=str(tmp_path)))
    assert (changed.model, changed.max_turns, changed.cwd, changed.max_budget_usd) == (
        "scripted/repeat",
        9,
        str(tmp_path),
        0.5,
    )


def test_a_recipe_survives_the_run_config_so_a_resume_builds_the_same_agent(tmp_path: Path) -> None:
    s = settings_with(tmp_path / "home", '[agents.a]\nmodel = "scripted/plan"\nmax_turns = 3\n')
    recipe = plan(s, "a")
    again = Recipe.model_validate({**recipe.config(), "prompt": "hi", "session_store": None})
    assert again == recipe
    assert "output_schema" not in recipe.config()


def test_the_default_agent_has_the_built_in_tools_and_no_demo_tool(tmp_path: Path) -> None:
    s = settings_with(tmp_path / "home", "")
    real = build_agent(s, plan(s, None, Overrides(model="openai/gpt-4.1-mini", skills=False, memory="off")))
    demo = build_agent(s, plan(s, None, Overrides(model="scripted/slow", skills=False, memory="off")))
    assert real.instructions == DEFAULT_INSTRUCTIONS
    assert "scan_archive" not in {t.name for t in real.tools}
    assert "scan_archive" in {t.name for t in demo.tools}  # the scripted demo's slow scenario calls it


def test_guardrails_and_the_loop_guard_become_middleware(tmp_path: Path) -> None:
    from tether.guardrails import Guardrail
    from tether.harness.loop_guard import LoopGuard

    s = settings_with(
        tmp_path / "home",
        '[agents.g]\nmodel = "scripted/plan"\nloop_guard = { nudge_after = 2, stop_after = 4 }\n\n'
        '[[agents.g.guardrails]]\nname = "secrets"\nstages = ["input", "output"]\nblock = 0.5\n'
        'rules = [{ pattern = "private key", rationale = "asks for a secret", score = 0.1 }]\n',
    )
    guard, loops, governor = build_agent(s, plan(s, "g")).middleware
    assert isinstance(guard, Guardrail) and guard.name == "secrets" and tuple(guard.stages) == ("input", "output")
    assert guard.thresholds.block == 0.5
    assert isinstance(loops, LoopGuard) and (loops.nudge_after, loops.stop_after) == (2, 4)
    assert isinstance(governor, Governor) and governor.max_tool_rounds == 40  # on by default


def test_the_loop_guard_and_governors_are_on_by_default_and_can_be_turned_off(tmp_path: Path) -> None:
    from tether.harness.loop_guard import LoopGuard

    s = settings_with(tmp_path / "home", 'model = "scripted/plan"\n\n[agents.g]\nmodel = "scripted/plan"\n')
    kinds = [type(m) for m in build_agent(s, plan(s, None)).middleware]
    assert kinds == [LoopGuard, Governor]  # the default agent too: tether run, chat and serve build these
    assert [type(m) for m in build_agent(s, plan(s, "g")).middleware] == [LoopGuard, Governor]
    off = settings_with(
        tmp_path / "off",
        'model = "scripted/plan"\n\n[loop_guard]\nenabled = false\n\n[governors]\nmax_tool_rounds = 10\ndiscovery_rounds = 0\n\n'
        '[agents.g]\nmodel = "scripted/plan"\ngovernors = { enabled = false }\n',
    )
    [governor] = build_agent(off, plan(off, None)).middleware
    assert isinstance(governor, Governor)
    assert (governor.max_tool_rounds, governor.no_progress_rounds, governor.discovery_rounds) == (10, 6, None)
    assert build_agent(off, plan(off, "g")).middleware == []  # its own table wins
    with pytest.raises(ConfigError, match="2 or more"):
        bad = settings_with(tmp_path / "bad", 'model = "scripted/plan"\n\n[governors]\nno_progress_rounds = 1\n')
        build_agent(bad, plan(bad, None))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[agents.g.guardrails]]\nname = "x"\n', "needs jailbreaks = true or at least one"),
        ('[[agents.g.guardrails]]\nrules = [{ pattern = "(", rationale = "r" }]\n', "must be a regular expression"),
        ('[agents.g]\nmemory = "team"\n', '[agents.g] memory must be "user", "project" or "off"'),
        ("[agents.g]\nmax_turns = 0\n", "[agents.g] max_turns must be greater than 0, not 0"),
        ('[agents.g]\nmodle = "x/y"\n', "modle is not a known setting in [agents.g] (did you mean model?)"),
        (
            '[agents.g]\nmodel = "scripted/plan"\n\n[serve.agents.g]\nmodel = "scripted/plan"\n',
            "agent g is defined twice, in [agents.g] and [serve.agents.g]",
        ),
    ],
)
def test_a_bad_definition_is_one_line(text: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_with(tmp_path / "home", text)
    assert says in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def test_what_a_definition_names_is_checked_before_anything_runs(tmp_path: Path) -> None:
    s = settings_with(
        tmp_path / "home",
        '[agents.kb]\nmodel = "scripted/plan"\nkb = ["nowhere"]\n\n'
        '[agents.tools]\nmodel = "scripted/plan"\ntools = ["read_file", "rm_rf"]\n\n'
        '[agents.mcp]\nmodel = "scripted/plan"\nmcp = ["mail"]\n',
    )
    with pytest.raises(Exception, match="there is no knowledge base 'nowhere'"):
        plan(s, "kb")
    with pytest.raises(ConfigError, match=r"\[agents.tools\] tools names unknown tools rm_rf"):
        build_agent(s, plan(s, "tools"))
    with pytest.raises(Exception, match=r"\[agents.mcp\] mcp mail: no \[mcp.mail\]"):
        plan(s, "mcp")
    with pytest.raises(ConfigError, match=r"no agent 'other': define \[agents.other\].*defined: kb, tools, mcp"):
        plan(s, "other")


def test_serve_agents_tables_are_the_same_definitions_with_everything_run_accepts(tmp_path: Path) -> None:
    s = settings_with(
        tmp_path / "home",
        '[agents.new]\nmodel = "scripted/plan"\n\n'
        '[serve.agents.old]\nmodel = "scripted/plan"\nmemory = "off"\nskills = false\nmax_turns = 6\n'
        "loop_guard = {}\n\n[[serve.agents.old.guardrails]]\njailbreaks = true\n",
    )
    agents = served_agents(s)
    assert sorted(agents) == ["new", "old"]
    assert agents["old"].max_turns == 6 and len(agents["old"].middleware) == 3  # guardrail, loop guard, governors


def test_an_output_schema_file_is_read_relative_to_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "examples" / "timeout_report.schema.json", home / "report.json")
    s = settings_with(home, '[agents.r]\nmodel = "scripted/structured"\noutput_schema = "report.json"\n')
    assert plan(s, "r").output_schema is not None
    bad = settings_with(tmp_path / "bad", '[agents.r]\nmodel = "scripted/plan"\noutput_schema = "missing.json"\n')
    with pytest.raises(ConfigError, match=r"\[agents.r\] output_schema: cannot read missing.json"):
        plan(bad, "r")


def test_settings_built_in_code_are_checked_like_the_file(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, telemetry={"otlp_endpoint": "http://127.0.0.1:4318/v1/traces"})
    assert isinstance(s.telemetry, TelemetryTable) and s.telemetry.otlp_endpoint.endswith("/v1/traces")
    with pytest.raises(ConfigError, match=r"\[telemetry\] otlp_endpoint must be an http"):
        Settings(home=tmp_path, telemetry={"otlp_endpoint": "nowhere"})


def test_a_server_default_agent_has_no_memory_or_skills_of_the_person_at_the_machine(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "skills" / "triage").mkdir(parents=True)
    (home / "skills" / "triage" / "SKILL.md").write_text("---\nname: triage\ndescription: d\n---\nbody\n")
    s = settings_with(home, "")
    served = served_agents(s, model="scripted/plan", cwd=str(tmp_path))["default"]
    assert served.extensions == []
    ran = build_agent(s, plan(s, None, Overrides(model="scripted/plan", cwd=str(tmp_path))))
    assert sorted(type(e).__name__ for e in ran.extensions) == ["Memory", "Skills"]  # tether run's has both


def test_output_limit_and_completed_turns_come_from_the_definition_or_the_door(tmp_path: Path, workspace: Path) -> None:
    s = settings_with(
        tmp_path / "home",
        f'[agents.brief]\nmodel = "scripted/essay"\ncwd = "{workspace}"\nmax_tokens = 300\n'
        'continue_cut_text = false\ncompleted_turns = "full"\n'
        f'[agents.plain]\nmodel = "scripted/essay"\ncwd = "{workspace}"\n',
    )
    chat = Overrides(completed_turns="answers")  # what `tether chat` asks for
    brief = build_agent(s, plan(s, "brief", chat))
    assert (brief.max_tokens, brief.continue_cut_text, brief.completed_turns) == (300, False, "full")
    plain = build_agent(s, plan(s, "plain", chat))
    assert (plain.max_tokens, plain.continue_cut_text, plain.completed_turns) == (4096, True, "answers")
    assert build_agent(s, plan(s, "plain")).completed_turns == "full"  # `tether run`, the server
    # A recipe recorded before these settings existed builds the same agent as before.
    old = Recipe.model_validate({"model": "scripted/essay", "cwd": str(workspace)})
    assert (old.max_tokens, old.continue_cut_text, old.completed_turns) == (None, True, "full")
    with pytest.raises(ConfigError, match="completed_turns"):
        settings_with(tmp_path / "bad", '[agents.x]\ncompleted_turns = "some"\n')
