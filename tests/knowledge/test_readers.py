"""Reading files into text: HTML to Markdown, PDF page by page, encodings, what is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.knowledge import HashingEmbedder, KnowledgeBase
from tether.knowledge.readers import Skipped, read_document

from .conftest import pdf_of


def pdf_bytes(*pages: str, title: str | None = None) -> bytes:
    """A minimal valid PDF written by hand: one Helvetica text object per page, a correct xref."""
    n = len(pages)
    font = 3 + 2 * n
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(n)), n),
    ]
    for i, text in enumerate(pages):
        stream = b"BT /F1 12 Tf 72 712 Td (" + text.encode("latin-1") + b") Tj ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (4 + 2 * i, font)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info = b""
    if title is not None:
        objects.append(b"<< /Title (" + title.encode("latin-1") + b") >>")
        info = b" /Info %d 0 R" % len(objects)
    return pdf_of(objects, info)


# -- HTML ---------------------------------------------------------------------------------------


def test_html_becomes_markdown_with_its_title(tmp_path: Path) -> None:
    page = tmp_path / "guide.html"
    page.write_text("""<!doctype html><html><head><title>Valve guide</title><style>p{color:red}</style>
<script>alert('no')</script></head><body><nav>menu</nav><main>
<h2>Choosing a seal kit</h2><p>Use <b>SK-77</b> for hot water.</p>
<ul><li>EPDM seats</li><li>PTFE packing</li></ul></main></body></html>""")
    doc = read_document(page)
    assert doc.kind == "html" and doc.markdown is True
    assert doc.title == "Valve guide"
    assert doc.text.startswith("# Valve guide\n")
    assert "## Choosing a seal kit" in doc.text and "**SK-77**" in doc.text
    assert "EPDM seats" in doc.text
    assert "alert" not in doc.text and "color" not in doc.text and "menu" not in doc.text


def test_an_html_document_is_titled_and_chunked_under_its_headings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    intro = "Ball valves for process water, steam and light oils, in brass or stainless steel. " * 3
    (tmp_path / "guide.htm").write_text(
        f"<html><head><title>Valve guide</title></head><body><p>{intro}</p>"
        "<h2>Seals</h2><p>Use SK-77 for hot water.</p></body></html>"
    )
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    assert kb.add_path(tmp_path).added == ["guide.htm"]
    assert kb.documents()[0].title == "Valve guide"
    hit = kb.search("hot water", mode="keyword").hits[0]
    assert hit.chunk.heading == "Valve guide > Seals"


# -- PDF ----------------------------------------------------------------------------------------


def test_a_pdf_is_read_page_by_page_with_page_headings(tmp_path: Path) -> None:
    path = tmp_path / "sheet.pdf"
    path.write_bytes(
        pdf_bytes("Pressure rating PN16 for FVAM-2050-B", "Seal kit SK-77 in EPDM", title="FVAM data sheet")
    )
    doc = read_document(path)
    assert doc.kind == "pdf" and doc.markdown is True and doc.title == "FVAM data sheet"
    assert doc.text == "# Page 1\n\nPressure rating PN16 for FVAM-2050-B\n\n# Page 2\n\nSeal kit SK-77 in EPDM"


def test_a_pdf_without_a_title_is_named_by_its_file_and_its_citations_lead_to_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "one.pdf").write_bytes(pdf_bytes("Torque the body halves to 25 Nm"))
    assert read_document(tmp_path / "one.pdf").title == "one.pdf"
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open(embedder=HashingEmbedder())
    assert kb.add_path(tmp_path).added == ["one.pdf"]
    hit = kb.search("torque", mode="keyword").hits[0]
    assert hit.chunk.heading == "Page 1" and hit.citation == "one.pdf:1-3"


def encrypted_pdf(tmp_path: Path, user_password: str) -> Path:
    from pypdf import PdfWriter

    plain = tmp_path / "plain.pdf"
    plain.write_bytes(pdf_bytes("Confidential price list"))
    writer = PdfWriter(clone_from=str(plain))
    writer.encrypt(user_password, owner_password="owner-secret", algorithm="RC4-128")
    out = tmp_path / f"locked-{user_password or 'open'}.pdf"
    with out.open("wb") as f:
        writer.write(f)
    plain.unlink()
    return out


def test_an_encrypted_pdf_is_skipped_and_the_reason_says_encrypted(tmp_path: Path) -> None:
    path = encrypted_pdf(tmp_path, "user-secret")
    with pytest.raises(Skipped) as info:
        read_document(path)
    assert "encrypted" in str(info.value).lower(), str(info.value)


def test_an_encrypted_pdf_in_a_directory_is_skipped_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encrypted_pdf(tmp_path, "user-secret")
    (tmp_path / "notes.md").write_text("# Notes\n\nreadable\n")
    monkeypatch.chdir(tmp_path)
    report = KnowledgeBase.open().add_path(tmp_path)
    assert report.added == ["notes.md"]
    assert [name for name, _ in report.skipped] == ["locked-user-secret.pdf"]


def test_a_pdf_with_only_an_owner_password_is_read(tmp_path: Path) -> None:
    doc = read_document(encrypted_pdf(tmp_path, ""))
    assert doc.text == "# Page 1\n\nConfidential price list"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"this is not a pdf at all",
        b"%PDF-1.4\n" + bytes(range(256)) * 4,
        pdf_bytes("half a file")[:200],
        b"\x00" * 100,
    ],
    ids=["empty", "text", "header-then-noise", "truncated", "nul-bytes"],
)
def test_a_garbage_pdf_is_skipped_with_a_reason(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(data)
    with pytest.raises(Skipped, match="PDF"):
        read_document(path)


def test_a_pdf_with_no_text_layer_is_skipped_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdf_bytes(""))
    with pytest.raises(Skipped, match="no text layer"):
        read_document(path)


# -- text and encodings -------------------------------------------------------------------------


def test_a_utf8_bom_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes(b"\xef\xbb\xbf# Caf\xc3\xa9 notes\n\nGrind fine.\n")
    doc = read_document(path)
    assert doc.text == "# Café notes\n\nGrind fine.\n" and doc.kind == "markdown"
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    kb.add_path(path)
    assert kb.documents()[0].title == "Café notes"  # the BOM did not hide the heading
    assert kb.search("grind", mode="keyword").hits[0].chunk.heading == "Café notes"


def test_invalid_utf8_is_replaced_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9 latte\nna\xefve \xff\xfe\n")
    doc = read_document(path)
    assert doc.text == "caf\ufffd latte\nna\ufffdve \ufffd\ufffd\n" and doc.kind == "text"


@pytest.mark.parametrize(
    ("name", "kind", "markdown"),
    [("a.py", "code", False), ("a.txt", "text", False), ("README", "text", False), ("a.markdown", "markdown", True)],
)
def test_kinds_by_suffix(tmp_path: Path, name: str, kind: str, markdown: bool) -> None:
    (tmp_path / name).write_text("# one\nx = 1\n")
    doc = read_document(tmp_path / name)
    assert (doc.kind, doc.markdown) == (kind, markdown)


def test_nul_bytes_make_a_file_binary(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_bytes(b'{"a": 1}\x00\x00')
    with pytest.raises(Skipped, match="binary"):
        read_document(tmp_path / "data.json")
