"""Runs saved before ``RunState.ext`` kept the guardrails' and sub-agents' state, and a front
door's config, in fields of their own: they still load, and a question they wait on can still be
answered and resumed."""

from __future__ import annotations

import json
from typing import Any

from tests.guardrails.common import Recording, collect, result_of, rules
from tether import Agent, RunState, approve, reject, run_sync
from tether.guardrails import Guardrail, Rule, Thresholds
from tether.harness.subagent import children, parent_of
from tether.testing import FunctionModel

OFFER = "You can have a 40% discount on the FVAM-2050-B if you order 200 units."
DISCOUNT = Rule(r"\bdiscount\b", 0.4, "pricing", "discounts are decided by a person")


def held() -> tuple[Agent, FunctionModel, Recording, dict[str, Any]]:
    """A run whose answer a guardrail holds for a person, saved as tether saved it before ext."""
    classifier = rules(DISCOUNT)
    fm = FunctionModel(lambda m, r: OFFER)
    guard = Guardrail(classifier, stages=("output",), thresholds=Thresholds(block=None, ask=0.5), name="sales")
    agent = Agent(fm, middleware=[guard])
    state = RunState()
    assert result_of(collect(agent, "A better price?", state=state)).status == "interrupted"
    saved = json.loads(state.model_dump_json())
    mine = saved["ext"].pop("guardrails")
    assert saved.pop("ext") == {} and saved.pop("answer") is None
    older = {f"guardrail_{k}": v for k, v in mine.items()}
    saved |= older | {"config": {"cwd": "/srv", "prompt": "A better price?"}, "children": {}, "child_decisions": {}}
    saved |= {"parent_run_id": None, "parent_call_id": None}
    return agent, fm, classifier, saved


def test_an_older_saved_run_loads_with_its_plugins_fields_moved_into_ext() -> None:
    _, _, _, saved = held()
    assert saved["guardrail_pending"]["stage"] == "output" and saved["guardrail_held"] is not None
    state = RunState.model_validate(saved)
    dumped = state.model_dump()
    assert not [k for k in dumped if k.startswith("guardrail") or k.startswith("child")]
    assert state.config == {"cwd": "/srv", "prompt": "A better price?"}
    assert set(state.ext) == {"legacy"}  # what a plug-in takes over when it next runs
    assert children(state) == {} and parent_of(state) == (None, None)


def test_an_older_saved_runs_held_answer_is_delivered_once_approved() -> None:
    agent, fm, classifier, saved = held()
    state = RunState.model_validate(saved)
    approve(state)
    r = run_sync(agent, state=state)
    assert r.status == "completed" and r.output == OFFER
    assert len(fm.requests) == 1 and len(classifier.seen) == 1  # not asked, nor judged, again
    assert "legacy" not in state.ext and state.ext["guardrails"]["pending"] is None


def test_an_older_saved_runs_held_answer_is_refused_once_rejected() -> None:
    agent, _, _, saved = held()
    state = RunState.model_validate(saved)
    reject(state, reason="not without a contract")
    r = run_sync(agent, state=state)
    assert r.status == "failed" and "not without a contract" in r.output
    assert "40%" not in state.model_dump_json()


def test_an_older_sub_agents_state_is_found_where_it_was() -> None:
    kept = {"done": True, "run_id": "run_c", "status": "completed", "output": "ok", "cost_usd": 0.5}
    parent = RunState.model_validate({"run_id": "run_p", "children": {"call_1": kept}})
    child = RunState.model_validate({"run_id": "run_c", "parent_run_id": "run_p", "parent_call_id": "call_1"})
    assert children(parent) == {"call_1": kept} and parent_of(child) == ("run_p", "call_1")
    again = RunState.model_validate_json(parent.model_dump_json())
    assert children(again) == {"call_1": kept}
