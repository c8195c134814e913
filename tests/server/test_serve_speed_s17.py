"""What a serving process does for its speed under load: the cyclic collector tuned once it is ready
(tether.server.runs.tune_collector), in `tether serve` and in its run processes."""

from __future__ import annotations

import gc
import json
import os
import time
from pathlib import Path

import httpx

from tests.server.conftest import serve_process
from tether.server.runs import YOUNG_COLLECT_EVERY, tune_collector

# An agents module that reports, from a thread of each process that imports it, the collector's
# settings once something was frozen (or after 20 s without: then as they are).
AGENTS = """
import gc, json, os, threading, time
from pathlib import Path
from tether import Agent

def _report():
    deadline = time.monotonic() + 20
    while not gc.get_freeze_count() and time.monotonic() < deadline:
        time.sleep(0.02)
    out = Path(os.environ["GC_REPORTS"]) / f"{os.getpid()}.json"
    out.write_text(json.dumps([gc.get_threshold()[0], gc.get_freeze_count()]))

threading.Thread(target=_report, daemon=True).start()
agents = {"plan": Agent("scripted/hello")}
"""


def _reports(folder: Path, count: int) -> list[list[int]]:
    deadline = time.monotonic() + 40
    while len(found := sorted(folder.glob("*.json"))) < count:
        assert time.monotonic() < deadline, f"{len(found)} of {count} processes reported"
        time.sleep(0.05)
    return [json.loads(p.read_text()) for p in found]


def test_tether_serve_and_its_run_processes_tune_the_collector_once_ready(tmp_path: Path) -> None:
    """Was: `tether serve` kept Python's default collector (the youngest generation walked after
    every 700 new objects, the imports' objects walked at every full collection): about 8 % of the
    server's CPU at 500 streams went to it."""
    module = tmp_path / "agents.py"
    module.write_text(AGENTS)
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "GC_REPORTS": str(reports)}
    proc, url = serve_process("--agent", str(module), "--run-processes", "1", env=env)
    try:
        with httpx.Client(base_url=url, timeout=60) as client:  # a run, so that a run process starts
            sid = client.post("/v1/sessions", json={"agent": "plan"}).json()["session_id"]
            client.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}).raise_for_status()
        tuned = _reports(reports, 2)  # the server's process and its run process
    finally:
        proc.terminate()
        proc.wait(30)
    for threshold, frozen in tuned:
        assert threshold == YOUNG_COLLECT_EVERY and frozen > 1000, tuned


def test_tune_collector_freezes_what_exists_and_collects_the_young_less_often() -> None:
    """Was: no such step (see the test above); a cycle made after it is still collected."""
    before = gc.get_threshold()
    try:
        tune_collector()
        assert gc.get_threshold() == (YOUNG_COLLECT_EVERY, *before[1:])
        assert gc.get_freeze_count() > 1000

        class Node:
            other: object = None

        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle, garbage once the names go
        del a, b
        assert gc.collect() >= 2
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
