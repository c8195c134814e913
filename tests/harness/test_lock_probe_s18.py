"""A run store's locks, while another process keeps asking who holds them (a second server on the
same home asks so of every run it shows)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tether.harness.store import RunStore

PROBER = """
import os, sys
from tether.harness.store import RunStore
store, stop = RunStore(sys.argv[1]), sys.argv[2]
print("probing", flush=True)
while not os.path.exists(stop):
    store.held("run_probed")
    store.session_holder("s_probed")
"""


def test_a_run_and_its_session_are_taken_while_another_process_asks_who_holds_them(tmp_path: Path) -> None:
    """Was: RunStore.held and session_holder ask with a shared lock, taken and let go at once; a run
    that took its exclusive lock in that moment was refused as "running in another process right
    now" (and its session as "being continued by another run"), though nobody held either."""
    store = RunStore(tmp_path / "runs")
    with store.lock("run_probed"), store.lock_session("s_probed", "run_probed"):
        pass  # the run's folder and the session's lock file are there for the prober to ask about
    stop = tmp_path / "stop"
    prober = subprocess.Popen(
        [sys.executable, "-c", PROBER, str(tmp_path / "runs"), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert prober.stdout is not None and prober.stdout.readline() == "probing\n"
        for _ in range(300):
            with store.lock("run_probed"), store.lock_session("s_probed", "run_probed"):
                pass
    finally:
        stop.write_text("")
        prober.wait(30)
    assert prober.returncode == 0
