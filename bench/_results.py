"""What the benchmarks share: where they write their figures, which commit they measured, and
starting a scripted server in its own process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def write_results(name: str, data: Any) -> None:
    out = ROOT / "bench" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")


def tether_commit() -> str:
    """The commit measured (with "+changes" when the work tree differs from it)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def start_server(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    """Start a server that prints its URL as the last word of its first line; (process, URL)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"the scripted server did not start: {url!r}")
    return proc, url
