"""``tether scripted serve`` (src/tether/cli/scripted.py)."""

from __future__ import annotations

import subprocess

import httpx


def test_scripted_serve_prints_its_address(env: dict[str, str]) -> None:
    proc = subprocess.Popen(["tether", "scripted", "serve", "--port", "0"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert httpx.get(url + "/models").json()["object"] == "list"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_an_unknown_fault_is_refused_before_serving(env: dict[str, str]) -> None:
    from tests.cli.conftest import tether

    for bad in ("bogus", "stall:soon", "503:x", "429:retry_after=never"):
        out = tether("scripted", "serve", "--port", "0", "--fault", bad, env=env, timeout=30)
        assert out.returncode == 2 and "fault" in out.stderr and repr(bad) in out.stderr, (bad, out.stderr)
        assert out.stdout == ""  # it never served
