"""Intent frames: what an injection says, in words shared across languages.

:func:`frames` gives the frames a normalised text touches (a target named, said cancelled or
replaced, a claim of authority, a secret sent somewhere...) and each pair of them, as features for
the model (``\\x01frame`` and ``\\x01a+b``). The stems are those of :mod:`tether.memory._lexicon`,
read here from the look-up tables ``bench/memory_corpus/train.py`` ships beside the model's
weights (``_model/scan_frames.json``, :func:`tether.memory._lexicon.tables`): the scan never
imports the lexicon itself.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

__all__ = ["SHIPPED", "frames", "use"]

SHIPPED = Path(__file__).with_name("_model") / "scan_frames.json"

# By a stem's first one, two and three characters: "stem|frame number|..." until first looked up,
# then [(stem, frame), ...] (each key is split once, when a text first has it).
_Table = dict[str, "str | list[tuple[str, str]]"]
_tables: tuple[_Table, _Table, _Table] | None = None
_names: list[str] = []


def use(shipped: object) -> None:
    """Read the frames from ``shipped`` (:func:`tether.memory._lexicon.tables`) from now on:
    ``train.py``, fitting a lexicon not shipped yet. None goes back to the shipped file."""
    global _tables, _names
    if shipped is None:
        _tables = None
        return
    names = shipped.get("frames") if isinstance(shipped, dict) else None
    tables = shipped.get("tables") if isinstance(shipped, dict) else None
    if not (isinstance(names, list) and isinstance(tables, list) and len(tables) == 3):
        raise ValueError("not the frames' names and three tables")
    if not all(isinstance(t, dict) for t in tables):
        raise ValueError("a table is not an object")
    _names = [str(n) for n in names]
    _tables = (dict(tables[0]), dict(tables[1]), dict(tables[2]))


def _shipped() -> tuple[_Table, _Table, _Table]:
    if _tables is None:
        try:
            use(json.loads(SHIPPED.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            from tether.errors import ConfigError

            raise ConfigError(
                f"the memory scan's frames file {SHIPPED} is missing or damaged ({exc}); reinstall"
            ) from exc
    assert _tables is not None
    return _tables


def _split(table: _Table, key: str, packed: str) -> list[tuple[str, str]]:
    parts = packed.split("|")
    found = [(parts[j], _names[int(parts[j + 1])]) for j in range(0, len(parts), 2)]
    table[key] = found
    return found


def frames(norm: str) -> set[str]:
    """The frames ``norm`` touches, and each pair of them, as model features."""
    padded = f" {norm} "
    one, two, three = _shipped()
    hit: set[str] = set()
    for i in range(len(padded)):
        for table, key in ((one, padded[i]), (two, padded[i : i + 2]), (three, padded[i : i + 3])):
            found = table.get(key)
            if found is None:
                continue
            if isinstance(found, str):
                found = _split(table, key, found)
            for stem, name in found:
                if name not in hit and padded.startswith(stem, i):
                    hit.add(name)
    found_names = sorted(hit)
    out = {f"\x01{h}" for h in found_names}
    out.update(f"\x01{a}+{b}" for a, b in itertools.combinations(found_names, 2))
    return out
