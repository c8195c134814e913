"""Ordinary text in many languages, from Debian's translated manual pages: what a memory note may
sound like when it is harmless and imperative ("do not use", "ignore", "override", "password").

    apt-get install -y man-db groff-base manpages-de manpages-fr ... (LANGS below)
    python bench/memory_corpus/manpages.py     # writes bench/memory_corpus/manpages.jsonl

The file is committed, so training needs neither the packages nor ``man``. Deterministic for
given versions of the packages (Debian 12's manpages-* 4.18.1 here).

The split, made before anything was fitted on it: five languages are held out whole (Dutch,
Brazilian Portuguese and Ukrainian, as in the corpus; Czech and Finnish, which no template is
written in), and in the others every page whose name hashes to 0 mod 4 is held out. A page's
sentences are all in one part.
"""

from __future__ import annotations

import json
import random
import re
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench._kb_corpus import _is_alias, _render  # the knowledge base's man-page set renders them so

OUT = Path(__file__).with_name("manpages.jsonl")
MAN = Path("/usr/share/man")
# directory -> language code, as the corpus names them
LANGS = {
    "de": "de",
    "fr": "fr",
    "es": "es",
    "it": "it",
    "pl": "pl",
    "ru": "ru",
    "ja": "ja",
    "zh_CN": "zh",
    "tr": "tr",
    "sv": "sv",
    "da": "da",
    "nl": "nl",
    "pt_BR": "pt",
    "uk": "uk",
    "cs": "cs",
    "fi": "fi",
}
HELD_LANGS = {"nl", "pt", "uk", "cs", "fi"}
PAGES, PER_LANG, SEED = 80, 300, 1205
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


def sentences(rendered: str) -> list[str]:
    """Prose sentences of 5 to 60 words (or 12 to 200 characters without spaces) from a rendered
    page: paragraphs joined, option lists, headings and code left out."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", rendered):
        lines = [ln.strip() for ln in para.splitlines() if ln.strip()]
        if not lines or lines[0].startswith(("-", "$", "#", "/")) or lines[0].isupper():
            continue
        text = " ".join(lines)
        for s in _SENTENCE.split(text):
            s = s.strip()
            words = len(s.split())
            sized = 5 <= words <= 60 or (words < 5 and 12 <= len(s) <= 200 and not s.isascii())
            if sized and sum(c.isalpha() for c in s) >= 0.6 * len(s):
                out.append(s)
    return out


def rows() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for folder, lang in LANGS.items():
        files = sorted(p for sec in ("man1", "man5", "man7", "man8") for p in (MAN / folder / sec).glob("*.gz"))
        files = [p for p in files if not _is_alias(p)]
        if not files:
            raise SystemExit(f"no manual pages in {MAN / folder}: apt-get install -y manpages-{folder.lower()}")
        rng = random.Random(f"{SEED}:{lang}")
        picked = sorted(rng.sample(files, min(PAGES, len(files))))
        with ThreadPoolExecutor(max_workers=4) as pool:
            rendered = list(pool.map(lambda p: _render(p, timeout_s=20), picked))
        found: list[dict[str, str]] = []
        seen: set[str] = set()  # a translator's line repeated on every page counts once
        for path, text in zip(picked, rendered, strict=True):
            page = path.name.removesuffix(".gz")
            held = lang in HELD_LANGS or zlib.crc32(page.encode()) % 4 == 0
            for s in sentences(text):
                if s in seen:
                    continue
                seen.add(s)
                found.append({"text": s, "lang": lang, "page": page, "part": "hold" if held else "tune"})
        rng.shuffle(found)
        out.extend(sorted(found[:PER_LANG], key=lambda r: (r["page"], r["text"])))
        print(f"{lang}: {len(found)} sentences from {len(picked)} pages, kept {min(PER_LANG, len(found))}")
    return out


def main() -> None:
    data = rows()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data), encoding="utf-8")
    tune = sum(r["part"] == "tune" for r in data)
    print(f"wrote {OUT.name}: {len(data)} rows ({tune} tuning, {len(data) - tune} held out)", file=sys.stderr)


if __name__ == "__main__":
    main()
