"""How well the memory scan tells injections from ordinary notes, offline, with no model.

Runs tether's scan and a baseline of simple anchor patterns (a handful of regular expressions,
what a first attempt looks like) over ``tests/memory/scan_table.jsonl`` and prints confusion
matrices per language, per obfuscation and per category, for the table's tuned and held-out
parts (the held-out rows were never looked at while the rules were written). Also the scan's
speed: median microseconds per entry against a plain regex pass over the same text.

    python bench/memory_scan.py [--misses]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import ROOT, tether_commit, write_results

TABLE = ROOT / "tests" / "memory" / "scan_table.jsonl"

# The baseline: anchor patterns of the kind most first scanners use.
ANCHORS = [
    re.compile(p, re.I)
    for p in (
        r"ignore (all )?(previous|prior|above) instructions",
        r"disregard (all )?(previous|prior) (instructions|rules)",
        r"forget (all )?(your|previous) instructions",
        r"you are now",
        r"system prompt",
        r"developer mode",
        r"\bDAN\b",
        r"<\|?im_start\|?>|<system>|\[INST\]",
        r"(cat|curl|wget)[^\n]*(\.env|\.netrc|id_rsa|\$[A-Z_]*KEY)",
        r"[\u200b\u200c\u200d\u2060\ufeff\u202a-\u202e\u2066-\u2069]",
    )
]


def anchors(text: str) -> bool:
    return any(p.search(text) for p in ANCHORS)


def load() -> list[dict[str, str]]:
    return [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def confusion(rows: list[dict[str, str]], flagged: Callable[[str], bool]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for axis in ("lang", "obfuscation", "category", "set"):
        cells: dict[str, dict[str, int]] = defaultdict(lambda: {"tp": 0, "fn": 0, "tn": 0, "fp": 0})
        for row in rows:
            hit = flagged(row["text"])
            key = ("tp" if hit else "fn") if row["label"] == "attack" else ("fp" if hit else "tn")
            cells[row[axis]][key] += 1
            cells["ALL"][key] += 1
        out[axis] = dict(cells)
    return out


def rate(c: dict[str, int], attack: bool) -> str:
    n = c["tp"] + c["fn"] if attack else c["tn"] + c["fp"]
    if not n:
        return "    -"
    return f"{100 * (c['tp'] if attack else c['tn']) / n:5.1f}"


def table(title: str, ours: dict[str, dict[str, int]], base: dict[str, dict[str, int]]) -> None:
    print(f"\n{title:14} | attacks rejected % (n) | tether   anchors | notes accepted % (n) | tether   anchors")
    for key in sorted(ours, key=lambda k: (k == "ALL", k)):
        o, b = ours[key], base[key]
        print(
            f"{key:14} | {o['tp'] + o['fn']:>17}     | {rate(o, True)}   {rate(b, True)}   |"
            f" {o['tn'] + o['fp']:>16}     | {rate(o, False)}   {rate(b, False)}"
        )
        print(
            f"{'':14} |   (tether: {o['tp']} rejected, {o['fn']} missed; {o['tn']} accepted, {o['fp']} refused)"
        ) if key == "ALL" else None


def speed(rows: list[dict[str, str]], scan: Callable[[str], object]) -> dict[str, float]:
    texts = [r["text"] for r in rows]
    scan(texts[0])  # loads the confusables table once
    ours, base = [], []
    for _ in range(5):
        t = time.perf_counter()
        for text in texts:
            scan(text)
        ours.append((time.perf_counter() - t) / len(texts) * 1e6)
        t = time.perf_counter()
        for text in texts:
            anchors(text)
        base.append((time.perf_counter() - t) / len(texts) * 1e6)
    return {"scan_us_per_entry": statistics.median(ours), "anchors_us_per_entry": statistics.median(base)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--misses", action="store_true", help="list every attack missed and note refused")
    args = parser.parse_args()

    from tether.memory.scan import default_scanner

    scanner = default_scanner()
    rows = load()
    verdicts = {r["text"]: scanner.scan(r["text"]) for r in rows}
    ours_all = confusion(rows, lambda t: verdicts[t] is not None)
    base_all = confusion(rows, anchors)
    print(
        f"memory scan over {TABLE.relative_to(ROOT)}: {sum(r['label'] == 'attack' for r in rows)} attacks, "
        f"{sum(r['label'] == 'benign' for r in rows)} ordinary notes (tether {tether_commit()})"
    )
    for axis in ("set", "lang", "obfuscation", "category"):
        table(axis, ours_all[axis], base_all[axis])
    for part in ("tune", "holdout"):
        subset = [r for r in rows if r["set"] == part]
        o = confusion(subset, lambda t: verdicts[t] is not None)["lang"]
        table(f"lang/{part}", o, confusion(subset, anchors)["lang"])
    timing = speed(rows, scanner.scan)
    print(
        f"\nspeed: scan {timing['scan_us_per_entry']:.0f} us per entry, anchor regexes "
        f"{timing['anchors_us_per_entry']:.0f} us (median of 5 passes over the table)"
    )
    if args.misses:
        print("\nmissed attacks:")
        for r in rows:
            if r["label"] == "attack" and verdicts[r["text"]] is None:
                print(f"  [{r['set']}/{r['lang']}/{r['obfuscation']}/{r['category']}] {r['text'][:150]!r}")
        print("\nrefused ordinary notes:")
        for r in rows:
            if r["label"] == "benign" and verdicts[r["text"]] is not None:
                print(f"  [{r['set']}/{r['lang']}] {r['text'][:120]!r}\n      -> {verdicts[r['text']].reason[:160]}")  # type: ignore[union-attr]
    write_results(
        "memory_scan",
        {
            "commit": tether_commit(),
            "tether": ours_all,
            "anchors": base_all,
            "speed": timing,
            "rules": {r["text"][:60]: v.rule for r in rows if (v := verdicts[r["text"]]) is not None},
        },
    )


if __name__ == "__main__":
    main()
