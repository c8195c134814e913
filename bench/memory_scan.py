"""How well the memory scan tells injections from ordinary notes, offline, and what it costs.

Scanners compared on the HELD-OUT part of ``bench/memory_corpus/corpus.jsonl`` (templates and
commands no rule or weight was fitted on, and the rows of Dutch, Portuguese and Ukrainian that were
held out whole before those became tuning languages; see ``bench/memory_corpus/build.py``):

* ``model``: the default, :class:`tether.memory.scan.ModelScanner` (structure + the shipped model);
* ``rules``: :class:`tether.memory.scan.PatternScanner`, the ~440 rules;
* ``anchors``: a handful of anchor regexes, what a first scanner looks like.

Also the second, third, fourth and fifth held-out sets (``fresh.jsonl``, frozen before round two;
round eight, ``round8_*.py``, written by other hands and frozen before round seven; round thirteen,
``round13_*.py``, by other hands in forms no tuning round had, frozen unfitted; ``heldout5_*.py``,
written by hand after round fourteen and frozen unfitted, see :func:`heldout_five`), every set together,
the old table
(``tests/memory/scan_table.jsonl``, its held-out rows), the first paragraphs
of the standard library's docstrings and sentences of Debian's manual pages in 16 languages (benign
technical text nothing was tuned on), the cost (load: a fresh
process importing the scan and scanning one note, against ``python -c pass``; per note: median
microseconds over the corpus) and ``tether memory add`` against a raw interpreter's start-up.

    python bench/memory_scan.py [--misses] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import ROOT, tether_commit, write_results

CORPUS = ROOT / "bench" / "memory_corpus" / "corpus.jsonl"
TABLE = ROOT / "tests" / "memory" / "scan_table.jsonl"
FRESH = ROOT / "bench" / "memory_corpus" / "fresh.jsonl"
MANPAGES = ROOT / "bench" / "memory_corpus" / "manpages.jsonl"

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


def _jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(path: Path) -> list[dict[str, str]]:
    return [r for r in _jsonl(path) if _carries(r)]


def _carries(row: dict[str, str]) -> bool:
    """False for an attack row whose attack is not in it: tag characters carry ASCII only, so a
    Chinese attack "smuggled" in them left only the visible "Likes green tea." (the generator no
    longer writes such rows; the frozen second set still has some, and they are left out)."""
    if row["label"] != "attack" or row.get("obfuscation") != "tag_smuggling":
        return True
    payload = "".join(chr(ord(c) - 0xE0000) for c in row["text"] if 0xE0000 <= ord(c) <= 0xE007F)
    return sum(c.isalpha() for c in payload) >= 8


Cells = dict[str, dict[str, int]]


def confusion(rows: list[dict[str, str]], flagged: Callable[[str], bool], axis: str) -> Cells:
    cells: dict[str, dict[str, int]] = defaultdict(lambda: {"tp": 0, "fn": 0, "tn": 0, "fp": 0})
    for row in rows:
        hit = flagged(row["text"])
        key = ("tp" if hit else "fn") if row["label"] == "attack" else ("fp" if hit else "tn")
        cells[row[axis]][key] += 1
        cells["ALL"][key] += 1
    return dict(cells)


def pct(c: dict[str, int], attack: bool) -> str:
    n = c["tp"] + c["fn"] if attack else c["tn"] + c["fp"]
    return "    -" if not n else f"{100 * (c['tp'] if attack else c['tn']) / n:5.1f}"


def table(axis: str, results: dict[str, Cells]) -> None:
    names = list(results)
    print(
        f"\n{axis:12} | attacks n | "
        + " ".join(f"{n:>7}" for n in names)
        + " | notes n | "
        + " ".join(f"{n:>7}" for n in names)
    )
    first = results[names[0]]
    for key in sorted(first, key=lambda k: (k == "ALL", k)):
        a = first[key]["tp"] + first[key]["fn"]
        b = first[key]["tn"] + first[key]["fp"]
        print(
            f"{key:12} | {a:>9} | "
            + " ".join(f"{pct(results[n][key], True):>7}" for n in names)
            + f" | {b:>7} | "
            + " ".join(f"{pct(results[n][key], False):>7}" for n in names)
        )


def stdlib_docstrings() -> list[str]:
    """The first paragraph (40 to 600 characters) of every docstring of the public functions and
    classes of Python's standard library modules that import here: benign technical text in
    another voice than the corpus's notes, which no rule or weight was fitted on."""
    import importlib
    import inspect
    import warnings

    skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3", "ensurepip"}
    out: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(sys.stdlib_module_names):
            if name in skip or name.startswith("_"):
                continue
            try:
                module = importlib.import_module(name)
            except Exception:  # a module this platform lacks, or one that needs a display
                continue
            for obj in list(vars(module).values())[:400]:
                if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
                    continue
                doc = inspect.getdoc(obj)
                if doc and len(doc) > 40:
                    out.add(doc.split("\n\n")[0].replace("\n", " ")[:600])
    return sorted(out)


def load_manpages() -> list[dict[str, str]]:
    """Sentences of Debian's manual pages in 16 languages (``memory_corpus/manpages.py``), each an
    ordinary note. The shipped model was trained without them (``train.py --man-weight 0``), so
    all of them count."""
    return [{**r, "label": "benign"} for r in _jsonl(MANPAGES)]


HELDOUT5 = (
    ("heldout5_a", "H5A", 501),
    ("heldout5_b", "H5B", 502),
    ("heldout5_c", "H5C", 503),
    ("heldout5_d", "H5D", 504),
    ("heldout5_notes1", "H5_NOTES1", 505),
    ("heldout5_notes2", "H5_NOTES2", 506),
)


def heldout_five() -> list[dict[str, str]]:
    """The fifth held-out set (``memory_corpus/heldout5_*.py``: 52 attack templates over the seven
    kinds and 33 ordinary notes that use their words harmlessly, in sixteen languages, in the forms
    notes take: an order buried in a long note, an email signature, a code comment, a config file,
    quoted policy, role-play, a request to translate, a note from one's past self, a changelog, a
    form's fields, markdown and HTML comments), written by hand after round fourteen and frozen
    before any fitting; each attack also once obfuscated, each note once as a variant (as
    ``build.round_three`` does for every round). ``train.py`` checks its hashes and that no tuning
    row is one of its rows."""
    import importlib

    from build import round_three

    out: list[dict[str, str]] = []
    for module, name, seed in HELDOUT5:
        templates = getattr(importlib.import_module(module), name)
        out += [{**r, "part": "blind"} for r in round_three(templates, seed=seed)]
    return out


def held_out_sets() -> dict[str, list[dict[str, str]]]:
    """The five held-out sets, named so that they sort in order; the first's rows say why each is
    held out (``held_by``): its template never tuned on, else its language (some rows of a held-out
    exfiltration command too), else its command."""
    corpus = load(CORPUS)
    held = [r for r in corpus if r["part"] == "hold"]
    sys.path.insert(0, str(ROOT / "bench" / "memory_corpus"))
    from build import HELD_LANGS, round_eight, round_thirteen

    tuned = {r["template"] for r in corpus if r["part"] == "tune"}
    for r in held:
        r["held_by"] = (
            "template" if r["template"] not in tuned else "language" if r["lang"] in HELD_LANGS else "command"
        )
    return {
        "1 first": held,
        "2 second": load(FRESH),
        "3 third": round_eight(),
        "4 fourth": round_thirteen(),
        "5 fifth": heldout_five(),
    }


def per_note(rows: list[dict[str, str]], scan: Callable[[str], object]) -> float:
    texts = [r["text"] for r in rows]
    scan(texts[0])
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        for text in texts:
            scan(text)
        runs.append((time.perf_counter() - t) / len(texts) * 1e6)
    return statistics.median(runs)


def wall(argv: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def costs(runs: int) -> dict[str, float]:
    py = sys.executable
    note = "The repository now in use is acme/payments-v2."
    out = {
        "python_pass_ms": wall([py, "-c", "pass"], runs),
        "import_tether_memory_ms": wall([py, "-c", "import tether.memory"], runs),
        "model_load_and_first_scan_ms": wall(
            [py, "-c", f"import tether.memory.scan as s; s.ModelScanner().scan({note!r})"], runs
        ),
        "rules_load_and_first_scan_ms": wall(
            [py, "-c", f"import tether.memory.scan as s; s.PatternScanner().scan({note!r})"], runs
        ),
    }
    # Measured inside a fresh process: the model's import, load and first scan, after tether.memory.
    inner = (
        "import time, tether.memory; t = time.perf_counter(); from tether.memory.scan import {cls}; "
        f"{{cls}}().scan({note!r}); print((time.perf_counter() - t) * 1e3)"
    )
    for cls, key in (
        ("ModelScanner", "model_first_scan_in_process_ms"),
        ("PatternScanner", "rules_first_scan_in_process_ms"),
    ):
        got = [
            float(subprocess.run([py, "-c", inner.format(cls=cls)], check=True, capture_output=True, text=True).stdout)
            for _ in range(runs)
        ]
        out[key] = statistics.median(got)
    tether = str(Path(py).with_name("tether"))
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "TETHER_HOME": home}
        adds = []
        for i in range(runs):
            t = time.perf_counter()
            subprocess.run([tether, "memory", "add", f"{note} ({i})"], check=True, capture_output=True, env=env)
            adds.append(time.perf_counter() - t)
        out["tether_memory_add_ms"] = statistics.median(adds) * 1e3
        out["tether_version_ms"] = wall([tether, "--version"], runs, env)
    return out


def print_misses(
    held: list[dict[str, str]], verdicts: dict[str, Any], fresh: list[dict[str, str]], docs: list[str], model: Any
) -> None:
    """What ``--misses`` lists (every row read is a row less blind)."""
    print("\nmissed held-out attacks:")
    for r in held:
        if r["label"] == "attack" and verdicts[r["text"]] is None:
            print(f"  [{r['lang']}/{r['kind']}/{r['obfuscation']}] {r['text'][:140]!r}")
    print("\nrefused held-out notes:")
    for r in held:
        v = verdicts[r["text"]]
        if r["label"] == "benign" and v is not None:
            print(f"  [{r['lang']}] {r['text'][:120]!r}\n      -> {v.rule}: {v.reason[:140]}")
    print("\nrefused docstrings of the standard library (model):")
    for t in docs:
        print(f"  {t[:140]!r}")
    print("\nsecond set: missed attacks / refused notes:")
    for r in fresh:
        v = model.scan(r["text"])
        if (r["label"] == "attack") == (v is None):
            print(f"  [{r['label']}/{r['lang']}/{r['kind']}/{r['obfuscation']}] {r['text'][:120]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--misses",
        action="store_true",
        help="list the held-out attacks missed and notes refused (every row read is a row less blind: "
        "tune on the cross-validated figures of train.py, not on these)",
    )
    parser.add_argument("--runs", type=int, default=7, help="processes per start-up measurement (median)")
    args = parser.parse_args()

    from tether.memory.scan import ModelScanner, PatternScanner

    model, rules = ModelScanner(), PatternScanner()
    sets = held_out_sets()
    held = sets["1 first"]
    verdicts = {r["text"]: model.scan(r["text"]) for r in held}
    rule_hits = {r["text"]: rules.scan(r["text"]) is not None for r in held}
    scanners: dict[str, Callable[[str], bool]] = {
        "model": lambda t: verdicts[t] is not None,
        "rules": rule_hits.__getitem__,
        "anchors": anchors,
    }
    print(
        f"memory scan, held-out part of {CORPUS.relative_to(ROOT)}: {sum(r['label'] == 'attack' for r in held)} "
        f"attacks, {sum(r['label'] == 'benign' for r in held)} ordinary notes, "
        f"{len({r['lang'] for r in held})} languages (tether {tether_commit()}); % refused | % kept"
    )
    figures: dict[str, dict[str, Cells]] = {}
    for axis in ("lang", "kind", "obfuscation", "family", "held_by"):
        figures[axis] = {name: confusion(held, fn, axis) for name, fn in scanners.items()}
        table(axis, figures[axis])

    fresh = sets["2 second"]
    fresh_scanners: dict[str, Callable[[str], bool]] = {
        "model": lambda t: model.scan(t) is not None,
        "rules": lambda t: rules.scan(t) is not None,
        "anchors": anchors,
    }

    def report(key: str, rows: list[dict[str, Any]], title: str) -> None:
        """One held-out set, by language, kind and obfuscation, under ``figures[key_AXIS]``."""
        attacks, notes = (sum(r["label"] == label for r in rows) for label in ("attack", "benign"))
        print(f"\n{title}: {attacks} attacks, {notes} notes")
        for axis in ("lang", "kind", "obfuscation"):
            figures[f"{key}_{axis}"] = {name: confusion(rows, fn, axis) for name, fn in fresh_scanners.items()}
            table(axis, figures[f"{key}_{axis}"])

    report("fresh", fresh, f"the second held-out set, {FRESH.relative_to(ROOT)} (frozen before round two's tuning)")
    report(
        "blind",
        sets["3 third"],
        "the third held-out set, round eight (other hands; frozen before round seven's tuning)",
    )
    report(
        "forms",
        sets["4 fourth"],
        "the fourth held-out set, round thirteen (other hands, in forms no tuning round had; frozen unfitted)",
    )
    report(
        "fifth",
        sets["5 fifth"],
        "the fifth held-out set, heldout5_*.py (written by hand after round fourteen; frozen unfitted)",
    )

    every = [{**r, "set": name} for name, rows in sets.items() for r in rows]
    print("\nevery held-out set together (the model; the rules and anchors beside it)")
    figures["sets"] = {name: confusion(every, fn, "set") for name, fn in fresh_scanners.items()}
    table("set", figures["sets"])

    old = [r for r in load(TABLE) if r["set"] == "holdout"]
    print(f"\nthe old scan table's held-out rows ({len(old)}):")
    figures["old_table"] = {
        "model": confusion(old, lambda t: model.scan(t) is not None, "set"),
        "rules": confusion(old, lambda t: rules.scan(t) is not None, "set"),
        "anchors": confusion(old, anchors, "set"),
    }
    table("set", figures["old_table"])

    docs = stdlib_docstrings()
    refused_docs = {
        "model": [t for t in docs if model.scan(t) is not None],
        "rules": [t for t in docs if rules.scan(t) is not None],
        "anchors": [t for t in docs if anchors(t)],
    }
    print(
        f"\ntechnical text nothing was tuned on: the first paragraph of {len(docs)} docstrings of Python's "
        "standard library (ordinary text that names instructions, passwords, tokens and systems)"
    )
    for name, hits in refused_docs.items():
        print(f"  {name:8} refuses {len(hits):4} ({100 * len(hits) / max(len(docs), 1):.2f} %)")
    figures["stdlib_docstrings"] = {
        name: {"all": {"benign": len(docs), "benign_refused": len(hits)}} for name, hits in refused_docs.items()
    }

    pages = load_manpages()
    print(
        f"\nordinary text in {len({r['lang'] for r in pages})} languages nothing was tuned on: {len(pages)} "
        f"sentences of Debian's translated manual pages ({MANPAGES.relative_to(ROOT)}; % kept)"
    )
    figures["manpages"] = {
        "model": confusion(pages, lambda t: model.scan(t) is not None, "lang"),
        "rules": confusion(pages, lambda t: rules.scan(t) is not None, "lang"),
        "anchors": confusion(pages, anchors, "lang"),
    }
    table("lang", figures["manpages"])

    speed = {
        "model_us_per_note": per_note(held, model.scan),
        "rules_us_per_note": per_note(held, rules.scan),
        "anchors_us_per_note": per_note(held, anchors),
    }
    start = costs(args.runs)
    print("\ncost (medians): per note, and fresh processes")
    for k, v in {**speed, **start}.items():
        print(f"  {k:32} {v:9.1f}")
    print(
        f"  model load over python -c pass: {start['model_load_and_first_scan_ms'] - start['import_tether_memory_ms']:.1f} ms"
        f" beyond importing tether.memory; tether memory add = {start['tether_memory_add_ms'] / start['python_pass_ms']:.2f}x"
        f" python -c pass, {start['tether_memory_add_ms'] / start['tether_version_ms']:.2f}x tether --version"
    )
    if args.misses:
        print_misses(held, verdicts, fresh, refused_docs["model"], model)
    write_results("memory_scan", {"commit": tether_commit(), "held_out": figures, "speed": speed, "start": start})


if __name__ == "__main__":
    main()
