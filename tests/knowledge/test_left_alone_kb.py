"""Defects of the knowledge base that earlier attack rounds found and left alone: a base built
before credentials were withheld showed them through ``kb search``; an add whose stdout's reader
left (``kb add DIR | head -1``) stopped before the vectors; the secret shapes were memory's private
names."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tether.knowledge.base as kb_base
from tests.cli import conftest as cli
from tests.cli.conftest import run_main
from tests.conftest import run_reader_gone
from tether.knowledge import HashingEmbedder, KnowledgeBase, KnowledgeTools

from .conftest import pdf_of

env = cli.env
quiet_env = cli.quiet_env

# Made up, in the shapes their issuers give them (tether._secrets.CREDENTIAL_SHAPES).
OPENAI_KEY = "sk-proj-" + "Zq7" * 10 + "x9"
GH_TOKEN = "ghp_" + "A1b2C3d4" * 5
AWS_KEY = "AKIA" + "QWERTYUIOP123456"
KEYS = (OPENAI_KEY, GH_TOKEN, AWS_KEY)
DEPLOY = f"""# Deploy {OPENAI_KEY}

The billing service (part BX-220) calls the provider with {OPENAI_KEY} and signs uploads with
{AWS_KEY}.

## Token {GH_TOKEN}

The release job of part BX-220 pushes tags with this token.
"""


@pytest.fixture
def old_base(quiet_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$TETHER_HOME/kb/default.db`` as a tether from before credentials were withheld wrote it:
    its chunks, headings, title and graph hold the keys."""
    path = quiet_env / "kb" / "default.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    with monkeypatch.context() as m:
        m.setattr(kb_base, "withhold_secrets", lambda text: (text, 0))  # what add_text did then
        kb = KnowledgeBase.open(path, embedder=HashingEmbedder())
        kb.add_text("deploy.md", DEPLOY)
    stored = [r.text + r.heading for r in kb.store.chunks(range(1, 10)).values()]
    assert OPENAI_KEY in "".join(stored) and GH_TOKEN in "".join(stored)  # as an older tether left them
    kb.close()
    yield path


def no_key(text: str) -> None:
    for key in KEYS:
        assert key not in text


def test_kb_search_of_a_base_built_before_the_rule_withholds_its_credentials(
    old_base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for mode in ("hybrid", "keyword", "exact", "neighborhood", "hierarchical"):
        query = "BX-220" if mode == "exact" else "billing service release token"
        code, out, err = run_main("kb", "search", query, "--mode", mode, capsys=capsys)
        assert code == 0 and ("BX-220" in out or "billing" in out), (mode, out, err)
        no_key(out + err)
        code, out, err = run_main("kb", "search", query, "--mode", mode, "--json", capsys=capsys)
        result = json.loads(out)
        assert result["hits"], mode
        no_key(out + err)
    assert "[credential withheld: an API key]" in out
    code, out, err = run_main("kb", "list", capsys=capsys)
    assert code == 0 and "deploy.md" in out
    no_key(out + err)


def test_the_agents_tools_show_no_credential_of_an_old_base_in_headings_or_entities(old_base: Path) -> None:
    kb = KnowledgeBase.open(old_base, embedder=HashingEmbedder())
    tools = {t.name: t for t in KnowledgeTools(kb).tools()}
    answers = [
        tools["search_kb"].run({"query": "billing service release token"}),
        tools["lookup_exact"].run({"identifier": "BX-220"}),
        tools["entity_chunks"].run({"entity": "BX-220"}),
        tools["entity_chunks"].run({"entity": OPENAI_KEY}),  # a model that knows the key
    ]
    for answer in answers:
        no_key(answer.partition("\n")[2])  # the first line repeats the query, the model's own words
    assert "BX-220" in answers[0] and "[credential withheld" in answers[0]
    result = kb.search("billing", mode="neighborhood")
    assert result.hits and "BX-220" in result.entities
    no_key(repr(result))
    kb.close()


def test_the_credential_shapes_have_one_public_home_that_memory_and_knowledge_share() -> None:
    from tether._secrets import CREDENTIAL_SHAPES, CREDENTIAL_STARTS
    from tether.knowledge.base import withhold_secrets
    from tether.memory.core import _secret

    assert set(CREDENTIAL_STARTS) == {label for label, _ in CREDENTIAL_SHAPES}  # each found the fast way
    for key in KEYS:
        assert _secret(f"the key is {key}") is not None  # memory refuses it ...
        assert withhold_secrets(f"the key is {key}")[1] == 1  # ... and a base withholds it
    source = Path(kb_base.__file__).read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert "tether.memory.core" not in imported  # no longer memory's private names


def test_an_add_whose_reader_left_still_reads_every_path_and_makes_every_vector(
    env: dict[str, str], tmp_path: Path
) -> None:
    """``tether kb add a b | head -1``: the reader is gone before the first line (closed before the
    command starts, so it cannot print first), as head is after its line."""

    for folder, part in (("a", "PX-9"), ("b", "QV-7")):
        (tmp_path / folder).mkdir()
        for n in range(3):
            (tmp_path / folder / f"{n}.md").write_text(f"# {part} note {n}\n\nThe {part} pump, page {n}.\n")
    done = run_reader_gone(
        ["tether", "kb", "add", "a", "b", "--embedder", "hashing/256"],
        env={**env, "PYTHONUNBUFFERED": "1"},  # each line written as printed, as in many containers
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    kb = KnowledgeBase.open(Path(env["TETHER_HOME"]) / "kb" / "default.db")
    stats = kb.stats()
    assert stats["documents"] == 6  # the second folder was read too
    assert stats["embedded_chunks"] == stats["chunks"] > 0  # and every vector made
    kb.close()


def test_a_damaged_pdfs_warnings_reach_the_terminal_with_their_escapes_written_out(
    env: dict[str, str], tmp_path: Path
) -> None:
    """pypdf warns about a page's contents quoting them; a UTF-16 string there holds any control
    character. Python's last-resort handler wrote them raw: a document set the window's title."""
    hostile = "\x1b]0;PWNED\x07\x1b[31mRED".encode("utf-16-be").hex().encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents <FEFF" + hostile + b"> >>",
    ]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "sheet.pdf").write_bytes(pdf_of(objects))
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\nThe PX-9 pump.\n")
    done = cli.tether("kb", "add", "docs", "--embedder", "none", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "tether: pypdf: " in done.stderr and "\\x1b]0;PWNED" in done.stderr
    assert "skipped docs/sheet.pdf" in done.stderr


def test_an_add_that_finds_the_filler_finishing_has_its_vectors_made_all_the_same(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two ``kb add`` at once: the second finishes reading just after the first's filler looked for
    chunks the last time, before it let go of the lock. The second leaves its chunks to it ("being
    made by another process"); they were never made, and no command said so."""
    from tether.cli import main

    for folder, part in (("a", "PX-9"), ("b", "QV-7")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "note.md").write_text(f"# {part}\n\nThe {part} pump.\n")
    monkeypatch.chdir(tmp_path)
    real = KnowledgeBase.fill_vectors
    second: list[int] = []

    def fill_then_the_other_add_ends(self: KnowledgeBase, *args: object, **kwargs: object) -> int:
        made = real(self, *args, **kwargs)  # type: ignore[arg-type]
        if not second:  # the first add's filler, its last look done, the lock still held
            second.append(main(["kb", "add", "b"]))
        return made

    monkeypatch.setattr(KnowledgeBase, "fill_vectors", fill_then_the_other_add_ends)
    code, out, err = run_main("kb", "add", "a", "--embedder", "hashing/256", capsys=capsys)
    assert code == 0 and second == [0], err
    assert "being made by another process" in out  # the second add left its chunks to the first
    kb = KnowledgeBase.open(quiet_env / "kb" / "default.db")
    stats = kb.stats()
    assert stats["documents"] == 2 and stats["embedded_chunks"] == stats["chunks"]
    kb.close()


def test_the_vectors_of_an_old_bases_chunks_are_made_without_sending_its_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embeddings endpoint (``openai/...``) is a way out of the base: the chunks an older tether
    stored without their vectors (``--no-vectors``, an add stopped) went to it with their keys."""
    with monkeypatch.context() as m:
        m.setattr(kb_base, "withhold_secrets", lambda text: (text, 0))
        KnowledgeBase.open(tmp_path / "old.db").add_text("deploy.md", DEPLOY)

    sent: list[str] = []

    class Endpoint(HashingEmbedder):
        def embed(self, texts: object) -> object:
            sent.extend(texts)  # type: ignore[call-overload]
            return super().embed(texts)  # type: ignore[arg-type]

    kb = KnowledgeBase.open(tmp_path / "old.db", embedder=Endpoint())
    assert kb.fill_vectors() == kb.stats()["chunks"] > 0
    assert sent and "BX-220" in "".join(sent)
    no_key("".join(sent))
    kb.close()


def test_a_link_named_on_the_command_line_to_credentials_or_tethers_home_is_not_read(
    tmp_path: Path,
) -> None:
    """``kb add repo/*.md`` names each file the shell finds, links a cloned repository planted
    among them too: ``notes.md -> ~/.aws/credentials`` was read, and AWS's secret access key (a
    shape no pattern knows) was handed to every agent that searched the base."""
    home, tether_home, repo = tmp_path / "home", tmp_path / "home" / "tether", tmp_path / "repo"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = wJalrZEBRAQUARTZbPxRfiCY\n")
    (tether_home / "sessions").mkdir(parents=True)
    (tether_home / "sessions" / "s1.md").write_text("# Session\n\nthe user's card is ZEBRAQUARTZ\n")
    repo.mkdir()
    (repo / "README.md").write_text("# Readme\n\nThe PX-9 pump.\n")
    (repo / "notes.md").symlink_to(Path("..") / "home" / ".aws" / "credentials")
    (repo / "history.md").symlink_to(tether_home / "sessions" / "s1.md")
    # and folders: registry logins (~/.docker/config.json), tether's sessions
    (home / ".docker").mkdir()
    (home / ".docker" / "config.json").write_text('{"auths": {"r.example": {"auth": "ZEBRAQUARTZ"}}}\n')
    (repo / "assets").symlink_to(home / ".docker")
    (repo / "logs").symlink_to(tether_home / "sessions")
    kb = KnowledgeBase.open()
    for path in sorted(repo.glob("*")):  # what the shell hands over for repo/*
        kb.add_path(path, exclude=[tether_home])
    assert [Path(d.name).name for d in kb.documents()] == ["README.md"]
    assert kb.search("ZEBRAQUARTZ", mode="keyword").hits == []
    assert kb.search("aws_secret_access_key", mode="keyword").hits == []


def test_an_add_whose_stdout_cannot_be_written_says_so_and_finishes(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kb add DIR > /dev/full`` (a full disk): a traceback at the first line, the vectors unmade."""
    from tether.cli import main

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "note.md").write_text("# PX-9\n\nThe PX-9 pump.\n")
    monkeypatch.chdir(tmp_path)
    with open("/dev/full", "w") as full, monkeypatch.context() as m:
        m.setattr("sys.stdout", full)
        code = main(["kb", "add", "a", "--embedder", "hashing/256"])
    err = capsys.readouterr().err
    assert code == 0 and "stdout cannot be written (No space left on device)" in err, err
    kb = KnowledgeBase.open(quiet_env / "kb" / "default.db")
    assert kb.stats()["embedded_chunks"] == kb.stats()["chunks"] == 1
    kb.close()


def test_an_ignore_file_with_lines_git_cannot_read_keeps_its_other_rules(tmp_path: Path) -> None:
    """A cloned repository's .gitignore with a line git passes over ("[z-a]", a lone "!", a
    trailing backslash) ended the whole add with a traceback (re.error, GitIgnorePatternError)."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".gitignore").write_text("*.log\n[z-a]\n!\nnotes\\\nprivate.md\n")
    (tmp_path / "d" / "pumps.md").write_text("# Pumps\n\nThe PX-9 pump.\n")
    (tmp_path / "d" / "private.md").write_text("# Private\n\nZEBRAQUARTZ\n")
    (tmp_path / "d" / "run.log").write_text("ZEBRAQUARTZ\n")
    kb = KnowledgeBase.open()
    report = kb.add_path(tmp_path / "d")
    assert [Path(name).name for name in report.added] == ["pumps.md"]
    assert sum(report.passed_over.values()) == 2


def test_a_document_of_credential_starts_is_read_in_bounded_memory_with_the_same_findings() -> None:
    """Every place a shape may start was collected before any was tried: 16 MB of ``sk-sk-...``
    took more than half a gigabyte (a 64 MB file, the largest read, gigabytes). Only matches are
    kept now, and what is found is what the one pattern finds."""
    import tracemalloc

    from tether._secrets import credential_matches, credential_pattern

    text = "sk-" * 100_000  # 300 KB, not one credential
    tracemalloc.start()
    try:
        assert kb_base.withhold_secrets(text) == (text, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # the starts alone took about 8 MB
    mixed = f"a {OPENAI_KEY}.{AWS_KEY} x{GH_TOKEN} ({GH_TOKEN}) sk_live_{'Ab1' * 8} sk-{OPENAI_KEY}\n"
    expected = [(m.start(), m.group()) for m in credential_pattern().finditer(mixed)]
    assert [(m.start(), m.group()) for m in credential_matches(mixed)] == expected
    assert kb_base.withhold_secrets(mixed)[1] == len(expected) == 5
