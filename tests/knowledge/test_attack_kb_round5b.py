"""``tether kb add`` attacked on what it takes in from a folder and what the base then hands to a
model: hidden folders and files (``~/.tether/sessions``, ``~/.config/gh/hosts.yml``), files that
hold credentials by their names (``.env``, ``*.pem``, ``.ssh``), credentials inside a document's
text, tether's own home inside the folder added, and many small files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main
from tether.knowledge import KnowledgeBase
from tether.knowledge.tools import render

env = cli.env
quiet_env = cli.quiet_env

# Made up, in the shapes their issuers give them (tether.memory.core's list).
OPENAI_KEY = "sk-proj-" + "Zq7" * 10 + "x9"
GH_TOKEN = "gho_" + "A1b2C3d4" * 5
AWS_KEY = "AKIA" + "QWERTYUIOP123456"


def home_like(root: Path) -> Path:
    """A home folder as people have them: notes they mean to add, and the usual hidden things."""
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "pumps.md").write_text("# Pumps\n\nThe PX-9 pump is rated for 16 bar.\n")
    files = {
        ".tether/sessions/2026-12-01.jsonl": '{"role": "user", "content": "my card is 4111 ZEBRAQUARTZ"}\n',
        ".config/gh/hosts.yml": f"github.com:\n    oauth_token: {GH_TOKEN}\n    user: ZEBRAQUARTZ\n",
        ".env": f"OPENAI_API_KEY={OPENAI_KEY}\n",
        ".env.production.json": '{"password": "ZEBRAQUARTZ"}\n',
        ".ssh/config": "Host ZEBRAQUARTZ\n",
        ".aws/credentials.json": '{"secret": "ZEBRAQUARTZ"}\n',
        ".npmrc": "//registry/:_authToken=ZEBRAQUARTZ\n",
        "notes/server.pem": "-----BEGIN PRIVATE KEY-----\nZEBRAQUARTZ\n-----END PRIVATE KEY-----\n",
        "notes/.draft.md.swp": "ZEBRAQUARTZ\n",
        "notes/.hidden-notes.md": "# ZEBRAQUARTZ draft\n",
        "project/.git/config": "[remote] url = https://ZEBRAQUARTZ@example.invalid\n",
        "project/credentials.json": '{"client_secret": "ZEBRAQUARTZ"}\n',
        "project/readme.md": "# Project\n\nNothing secret here.\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_adding_a_home_folder_reads_no_hidden_entry_and_no_credentials_file(tmp_path: Path) -> None:
    root = home_like(tmp_path / "user")
    kb = KnowledgeBase.open()
    report = kb.add_path(root)
    names = sorted(Path(d.name).name for d in kb.documents())
    assert names == ["pumps.md", "readme.md"], names
    assert kb.search("ZEBRAQUARTZ", mode="keyword").hits == []
    # Said in counts, by reason
    assert sum(report.passed_over.values()) >= 8, report.passed_over
    assert any("hidden" in why for why in report.passed_over)
    assert any("credentials" in why for why in report.passed_over)


def test_hidden_entries_are_read_when_asked_but_credentials_files_never(tmp_path: Path) -> None:
    root = home_like(tmp_path / "user")
    kb = KnowledgeBase.open()
    kb.add_path(root, hidden=True)
    names = {d.name.split("/user/", 1)[-1] for d in kb.documents()}
    assert "notes/.hidden-notes.md" in names
    assert ".tether/sessions/2026-12-01.jsonl" in names
    assert not {".env", ".env.production.json", ".ssh/config", ".npmrc", "project/credentials.json"} & names
    assert not any(n.startswith((".git/", "project/.git/", ".aws/")) or n.endswith(".pem") for n in names)
    # gh's hosts.yml is read with --hidden, but the token in it is not
    hits = kb.search("oauth_token github", mode="keyword").hits
    assert hits and all(GH_TOKEN not in h.chunk.text for h in hits)
    assert "[credential withheld: a GitHub token]" in hits[0].chunk.text


def test_kb_add_says_what_it_passed_over_in_counts_and_reads_hidden_with_the_flag(
    quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home_like(tmp_path / "user")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main("kb", "add", "user", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    assert "2 added" in out
    line = next(x for x in out.splitlines() if "passed over" in x)
    assert "hidden" in line and "credentials" in line and "--hidden" in line
    assert (
        "ZEBRA" not in out + err and "credentials.json" not in out + err and ".env.production" not in out + err
    )  # counts, not names
    code, out, err = run_main("kb", "add", "user", "--hidden", capsys=capsys)
    assert code == 0, err
    assert "credentials" in out and "withheld" in out


def test_a_credential_inside_a_document_never_reaches_the_agent_and_lines_still_cite(tmp_path: Path) -> None:
    doc = tmp_path / "setup.md"
    doc.write_text(
        "# Setup\n\n"
        f"Export OPENAI_API_KEY={OPENAI_KEY} before you start.\n"
        f"The deploy user has {AWS_KEY} as its access key.\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
        "QyNTUxOQAAACDx\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
        "The flange torque is 45 Nm.\n"
    )
    kb = KnowledgeBase.open()
    report = kb.add_path(doc)
    assert report.withheld == [(report.added[0], 3)]
    everything = "\n".join(h.chunk.text for h in kb.search("setup key torque deploy", mode="keyword", k=50).hits)
    for secret in (OPENAI_KEY, AWS_KEY, "b3BlbnNzaC1rZXkt", "QyNTUxOQAAACDx"):
        assert secret not in everything
    assert "[credential withheld: an API key]" in everything
    assert kb.search(OPENAI_KEY, mode="exact").hits == []
    # the agent's tool sees the masked text; the last line keeps its number (9)
    answer = render(kb.search("flange torque deploy export"), 8000)
    assert OPENAI_KEY not in answer and AWS_KEY not in answer
    torque = kb.search("flange torque", mode="keyword").hits[0]
    assert torque.chunk.end_line == 9


def test_tethers_own_home_inside_the_folder_is_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "guide.md").write_text("# Guide\n\nTurn the valve left.\n")
    state = project / "state"  # TETHER_HOME, not hidden: its sessions hold whole conversations
    (state / "sessions").mkdir(parents=True)
    (state / "sessions" / "a.jsonl").write_text('{"content": "ZEBRAQUARTZ said in confidence"}\n')
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TETHER_HOME", str(state))
    monkeypatch.chdir(project)
    for _ in range(2):  # the second add finds the base's own files (default.db, its lock, its log) there
        code, out, err = run_main("kb", "add", ".", "--embedder", "none", capsys=capsys)
        assert code == 0, err
        (state / "kb" / "default.fill.log").write_text("ZEBRAQUARTZ in a log\n")
    code, out, err = run_main("kb", "list", capsys=capsys)
    assert out.split()[0] == "docs/guide.md" and len(out.splitlines()) == 1, out
    code, out, err = run_main("kb", "search", "ZEBRAQUARTZ", "--mode", "keyword", capsys=capsys)
    assert "no results" in err


def test_sync_removes_what_an_earlier_add_read_from_hidden_folders(tmp_path: Path) -> None:
    root = home_like(tmp_path / "user")
    kb = KnowledgeBase.open()
    kb.add_path(root, hidden=True)
    assert kb.search("ZEBRAQUARTZ", mode="keyword").hits
    kept = kb.add_path(root)
    assert any(name.endswith(".jsonl") for name in kept.gone)
    kb.add_path(root, prune=True)
    assert kb.search("ZEBRAQUARTZ", mode="keyword").hits == []
    assert sorted(Path(d.name).name for d in kb.documents()) == ["pumps.md", "readme.md"]


SHAPES = {
    "an API key": OPENAI_KEY,
    "an AWS access key": AWS_KEY,
    "a GitHub token": GH_TOKEN,
    "a GitLab token": "glpat-" + "Ab1" * 8,
    "a Slack token": "xoxb-" + "1234567890ab",
    "a Google API key": "AIza" + "Bc9" * 11 + "dd",
    "a Stripe key": "sk_live_" + "Ab1" * 8,
    "a Hugging Face token": "hf_" + "Ab1" * 11,
    "an npm token": "npm_" + "Ab1" * 12,
    "a PyPI token": "pypi-AgE" + "Ab1" * 18,
    "a SendGrid key": "SG." + "a" * 22 + "." + "b" * 43,
    "a JSON Web Token": "eyJ" + "a" * 12 + ".eyJ" + "b" * 12 + "." + "c" * 12,
    "a private key": "-----BEGIN RSA PRIVATE KEY-----",
}


def test_every_shape_memory_refuses_is_withheld_from_a_document() -> None:
    from tether._secrets import CREDENTIAL_SHAPES
    from tether.knowledge.base import withhold_secrets

    assert {label for label, _ in CREDENTIAL_SHAPES} == set(SHAPES)  # a new shape in memory: add its sample here
    for label, secret in SHAPES.items():
        text, n = withhold_secrets(f"line one\nthe value {secret} is here\nline three\n")
        assert n == 1 and secret not in text, label
        assert f"[credential withheld: {label}]" in text and text.count("\n") == 3
    plain = "The PX-9 pump is rated for 16 bar; ask the desk (sk-1 is a part number).\n"
    assert withhold_secrets(plain) == (plain, 0)


def test_a_credentials_file_named_on_its_own_is_not_read_either(tmp_path: Path) -> None:
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        "[default]\naws_access_key_id = AKIAQWERTYUIOP123456\naws_secret_access_key = wJalrZEBRAQUARTZbPxRfiCY\n"
    )
    (tmp_path / ".env").write_text("DB_PASSWORD=ZEBRAQUARTZ\n")
    (tmp_path / "deploy.pem").write_text("ZEBRAQUARTZ\n")
    kb = KnowledgeBase.open()
    for path in (tmp_path / ".aws" / "credentials", tmp_path / ".env", tmp_path / "deploy.pem"):
        report = kb.add_path(path)
        assert not report.added and any("credentials" in why for why in report.passed_over), path
    assert kb.documents() == []


def test_a_base_built_before_the_rule_does_not_show_its_credentials_to_the_agent() -> None:
    kb = KnowledgeBase.open()
    # as an earlier tether stored it: the chunk's text holds the key
    kb.store.replace_document(
        "setup.md",
        path=None,
        title="Setup",
        hash="old",
        meta={},
        chunks=[(1, 2, "Setup", f"Set OPENAI_API_KEY={OPENAI_KEY} for the pump monitor.", None)],
        entities=[],
        relations=[],
    )
    result = kb.search("pump monitor", mode="keyword")
    assert result.hits and OPENAI_KEY not in result.hits[0].chunk.text  # withheld as it leaves the base
    answer = render(result, 8000)
    assert OPENAI_KEY not in answer and "[credential withheld: an API key]" in answer
