"""A run `tether mcp serve` drives records its agent's token limit, as it records its turns and
budget, so `tether resume` rebuilds the agent with it."""

from __future__ import annotations

from pathlib import Path

from tether import Agent
from tether.assembly import Recipe, build_agent
from tether.config import Settings
from tether.connectors.serve import _run_record


def test_a_served_runs_record_keeps_its_token_limit_for_tether_resume(tmp_path: Path) -> None:
    """Was: the record kept max_turns and max_budget_usd but not max_run_tokens, so `tether resume`
    of a run `tether mcp serve` stopped (for a person, say) rebuilt its agent with no token limit
    and the run went on unbounded in tokens."""
    agent = Agent("scripted/plan", max_turns=7, max_budget_usd=0.5, max_run_tokens=1234)
    record = _run_record("support", agent, "find the timeout")
    assert (record["max_turns"], record["max_budget_usd"], record["max_run_tokens"]) == (7, 0.5, 1234)
    recipe = Recipe.model_validate({**record, "agent": None})  # [agents.support] is not in this home's config
    rebuilt = build_agent(Settings(home=tmp_path), recipe)
    assert (rebuilt.max_turns, rebuilt.max_budget_usd, rebuilt.max_run_tokens) == (7, 0.5, 1234)
