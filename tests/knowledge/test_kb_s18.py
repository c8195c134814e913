"""Session 18: the knowledge base's exact search in scripts written without spaces, the one-time
reindex on Postgres, the size limit of a file added, and the citations of a page of one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main

quiet_env = cli.quiet_env

THAI = "ผมชอบกินข้าวผัดกับไก่ทุกวัน\nเครื่องสูบน้ำต้องเปลี่ยนซีลทุกปี\n"  # no space between the words


def test_exact_search_finds_a_thai_word_inside_a_sentence_as_it_finds_a_chinese_one(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether kb search ข้าวผัด --mode exact`` said "no chunk contains 'ข้าวผัด' exactly" of a
    Thai sentence that holds it (as of Lao, Burmese and Khmer), where keyword and hybrid search found
    it and exact search found a Chinese word inside a Chinese sentence: the letters of those scripts
    around the word counted as part of a longer word, where Chinese characters are its edges. A part
    number written against Thai letters (รุ่นFVAM-2050-Bใช้) was not found exactly either."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thai.txt").write_text(THAI)
    (tmp_path / "zh.txt").write_text("这个阀门的密封圈需要每年更换。\n")
    (tmp_path / "khmer.txt").write_text("ខ្ញុំស្រឡាញ់ម្ហូបខ្មែរ\n")
    (tmp_path / "burmese.txt").write_text("ကျွန်တော်ထမင်းစားပြီးပြီ\n")
    (tmp_path / "lao.txt").write_text("ຂ້ອຍມັກກິນເຂົ້າໜຽວທຸກມື້\n")
    (tmp_path / "part.txt").write_text("รุ่นFVAM-2050-Bใช้ซีลยาง\nรุ่นFVAM-2050-BXไม่ใช้\n")
    code, _, err = run_main("kb", "add", ".", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    for word, where in (
        ("密封圈", ["zh.txt:1-1"]),
        ("ข้าวผัด", ["thai.txt:1-2"]),
        ("ស្រឡាញ់", ["khmer.txt:1-1"]),
        ("ထမင်း", ["burmese.txt:1-1"]),
        ("ເຂົ້າໜຽວ", ["lao.txt:1-1"]),
        ("FVAM-2050-B", ["part.txt:1-2"]),
    ):
        code, out, err = run_main("kb", "search", word, "--mode", "exact", capsys=capsys)
        found = [line.split()[1] for line in out.splitlines() if line[:1].isdigit()]
        assert code == 0 and found == where, (word, out, err)
    # Still exact: a part of a letter (ผ without the vowel sign ั it carries in ผัด) is not the word.
    code, out, err = run_main("kb", "search", "ข้าวผ", "--mode", "exact", capsys=capsys)
    assert code == 0 and out == "" and "no chunk contains" in err
