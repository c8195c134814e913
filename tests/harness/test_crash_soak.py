"""The crash soak of ``bench/crash_soak.py`` in a bounded size (laws 1, 3 and 5).

SIGKILL at seeded points (trace events, a model request in flight, around a side effect, mid shell
command, and by timer) across five scenarios with counted side effects (one a parallel batch); each run resumed in a new
process until it ends, with the driver playing the person at approval and outcome-unknown stops.
Nothing may act twice, be paid twice, go missing or be left unresumable, and the final cost is the
uncrashed run's plus at most what was recorded as spent-unknown.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from bench.crash_soak import GUARANTEES, soak

# The driver, playing the person, waits for leftover commands by reading /proc/*/cwd (Linux only).
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the soak watches leftover commands through /proc"
)

SCENARIOS = ["counted", "approved", "shell", "server", "parallel"]


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    # Two runs per scenario: the first kill of each is one of the cases that matter (an effect
    # done but unrecorded, an approved call cut short, a shell command left running, a request in
    # flight); the rest are seeded.
    return soak(seed=11, runs=2, max_kills=3, scenarios=SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_kill_anywhere_and_resume_keeps_every_guarantee(results: dict[str, Any], scenario: str) -> None:
    figures, problems = results["scenarios"][scenario], results["problems"][scenario]
    assert figures["kills"] >= 2, f"too few kills landed to test anything: {figures}"
    broken = {name: figures[name] for name in GUARANTEES if figures.get(name)}
    assert not broken, f"{scenario}: {broken}\n" + "\n".join(problems)


def test_kills_cut_side_effects_and_requests_short(results: dict[str, Any]) -> None:
    # The soak is only worth its time if kills land where the outcome is unknown.
    all_figures = results["scenarios"].values()
    assert sum(f.get("outcome_unknown stops", 0) for f in all_figures) >= 4
    assert sum(f.get("unrecorded requests", 0) for f in all_figures) >= 1
    assert results["scenarios"]["shell"].get("outcome_unknown stops", 0) >= 1
