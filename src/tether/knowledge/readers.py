"""Reading files into text a knowledge base can chunk: text, Markdown, code, HTML and PDF.

HTML becomes Markdown (headings kept, scripts dropped; the same converter as ``web_fetch``). PDF
text comes from ``pypdf``, page by page, each page starting with a ``# Page N`` heading so a
citation's lines lead back to a page. Anything else is read as UTF-8 text (UTF-16 or UTF-32 when a
byte-order mark says so; other encodings: bytes that do not decode become U+FFFD); any other file
with NUL bytes in its first 8 KB is binary and skipped.

Directories are walked recursively; ``.gitignore``, ``.ignore`` and ``.tetherignore`` files are
honoured at every level (with ``pathspec``, git's own matching rules), and ``.git`` is never read.
Hidden files and folders (names starting with ``.``) below the folder named are passed over unless
asked for, as ripgrep does; files and folders that hold credentials by their names (``.ssh``,
``.aws``, ``.env``, ``*.pem``, ``.npmrc``...) are never read.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

__all__ = ["Document", "Skipped", "iter_files", "read_document"]

IGNORE_FILES = (".gitignore", ".ignore", ".tetherignore")
_TEXT = """
.txt .text .md .markdown .rst .adoc .org .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .conf .xml .log
.tex .py .pyi .js .mjs .cjs .ts .tsx .jsx .java .kt .kts .scala .go .rs .c .h .cc .cpp .hpp .cs .rb .php
.swift .m .mm .sh .bash .zsh .fish .ps1 .sql .r .lua .pl .pm .ex .exs .erl .hs .ml .clj .dart .vue .svelte
.css .scss .less .proto .graphql .tf .dockerfile .makefile .cmake .gradle .el .vim .nix .zig .jl .f90 .asm
.bat
"""
TEXT_SUFFIXES = frozenset(_TEXT.split())
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})


# A small PDF can hold hours of reading: pypdf extracts text at about half a megabyte of content
# per second, and a page's content stream inflates to 75 MB (one page of a 6 KB file held 1.4 MB,
# 3.6 s and 800,000 characters), or thousands of pages share one stream. So a PDF is read up to
# max_pdf_pages pages and MAX_PDF_CONTENT bytes of content, and says where it was cut.
MAX_PDF_PAGES = 5000
MAX_PDF_CONTENT = 64_000_000
# Any other file is read whole, twice over in memory (its bytes, then its text): a log of
# gigabytes in a folder added stopped the add with the machine out of memory.
MAX_TEXT_BYTES = 64_000_000
# Both limits are the one setting [kb] max_file_bytes: a person told "too large" is told it too.
RAISE_IT = "[kb] max_file_bytes raises it"


# What a folder's walk passes over, by reason: the add says how many of each, not their names.
HIDDEN = "hidden (names starting with '.'; --hidden reads them)"
CREDENTIALS = "credentials by their names (.env, .ssh, *.pem, .npmrc...; never read)"
IGNORED = "ignored by .gitignore, .ignore or .tetherignore"
OTHER_KIND = "of a kind not read (by extension: images, archives, office files...)"
EXCLUDED = "tether's own folder (sessions, bases, logs)"
# Files and folders that hold credentials by their names, never read even with hidden ones: a
# base's chunks are handed to any agent that searches it (and to its model provider).
_CREDENTIAL_DIRS = frozenset({".git", ".ssh", ".gnupg", ".aws", ".azure", ".docker", ".kube", ".password-store"})
_CREDENTIALS = """
.netrc _netrc .npmrc .pypirc .pgpass .git-credentials .htpasswd .boto .s3cfg .my.cnf .dockercfg
credentials credentials.json credentials.yml credentials.yaml credentials.toml client_secret.json
secrets.json secrets.yml secrets.yaml secrets.toml service-account.json id_rsa id_dsa id_ecdsa id_ed25519
"""
_CREDENTIAL_NAMES = frozenset(_CREDENTIALS.split())
_KEY_SUFFIXES = ".pem .key .p12 .pfx .jks .keystore .kdbx .gpg .asc .ovpn .tfstate .tfvars .ppk .age"
_CREDENTIAL_SUFFIXES = frozenset(_KEY_SUFFIXES.split())


def credential_name(name: str) -> bool:
    """Whether a file named ``name`` holds credentials by its name: ``.env`` and ``.env.local``,
    ``id_ed25519``, a key or a certificate, a package registry's or a database's login file."""
    lower = name.lower()
    return (
        lower in _CREDENTIAL_NAMES
        or lower == ".env"
        or lower.startswith(".env.")
        or lower.endswith(".env")
        or Path(lower).suffix in _CREDENTIAL_SUFFIXES
    )


@dataclass(frozen=True)
class Document:
    text: str
    title: str
    markdown: bool
    kind: str  # text | markdown | code | html | pdf
    cut: str = ""  # why only a part of the file was read
    undecoded: int = 0  # how many characters of a text file that is not UTF-8 were read as U+FFFD
    # For a text converted from the file (HTML): the file's lines (first, last) that each line of
    # ``text`` came from, and the column (from 1, in characters) on the first where its text
    # starts, so that a citation names the place a person opening the file sees
    lines: list[tuple[int, int, int]] | None = None


class Skipped(Exception):
    """A file that is not read into the base, with the reason in words."""


# How a skip for a failed read begins (no permission, an I/O error, the file gone meanwhile): what
# the file holds is not known, so its earlier document is kept. Any other skip is for what the file
# is now (binary, too large, a named pipe): its earlier text no longer stands for it.
CANNOT_READ = "cannot read it: "


def too_large(path: Path, size: int, max_bytes: int | None = None) -> str | None:
    """Why a file of ``size`` bytes is not read (a PDF is read up to its limits instead), or None.
    ``max_bytes``: the most read of one file (None: :data:`MAX_TEXT_BYTES`)."""
    limit = MAX_TEXT_BYTES if max_bytes is None else max_bytes
    if path.suffix.lower() == ".pdf" or size <= limit:
        return None
    read = f"a file other than a PDF is read up to {limit / 1e6:g} MB"
    return f"too large to read ({size / 1e6:,.1f} MB; {read}: {RAISE_IT})"


def read_document(
    path: Path,
    *,
    max_pdf_pages: int = MAX_PDF_PAGES,
    stream: BinaryIO | None = None,
    max_bytes: int | None = None,
) -> Document:
    """The text of the file at ``path``; read from ``stream`` when given (a file the caller
    opened, ``path`` naming it), never opening ``path`` again. ``max_bytes``: the most read of one
    file, a PDF's page content (None: :data:`MAX_TEXT_BYTES`, :data:`MAX_PDF_CONTENT`)."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return _pdf(path, max_pdf_pages, stream, max_bytes)
    try:
        size = os.fstat(stream.fileno()).st_size if stream is not None else path.stat().st_size
        why = too_large(path, size, max_bytes)
        if why is not None:
            raise Skipped(why)
        data = stream.read() if stream is not None else path.read_bytes()
    except OSError as exc:
        raise Skipped(f"{CANNOT_READ}{exc.strerror or exc}") from exc
    # UTF-16 and UTF-32 text (its byte-order mark first: what Windows tools and PowerShell's ">"
    # write) holds NULs; anything else that does is an image or an archive, which was indexed as
    # U+FFFD garbage
    codec = _bom_codec(data)
    binary = codec is None and b"\x00" in data[:8192]
    if suffix in HTML_SUFFIXES:
        if binary:
            raise Skipped("binary (not text, HTML or PDF)")
        from tether.tools.web import decode_text

        text, lines = html_text(decode_text(data, "text/html"))
        title = text.split("\n", 1)[0][2:].strip() if text.startswith("# ") else path.name
        return Document(text, title, True, "html", lines=lines)
    if binary:
        raise Skipped("binary (not text, HTML or PDF)")
    text = data.decode(codec or "utf-8-sig", errors="replace")
    # Latin-1 or Windows-1252 text read as UTF-8: each accented letter a U+FFFD, found by no search
    undecoded = text.count("\ufffd") - data.count("\ufffd".encode()) if codec is None else 0
    if suffix in MARKDOWN_SUFFIXES:
        return Document(text, "", True, "markdown", undecoded=undecoded)
    return Document(text, "", False, "text" if suffix in (".txt", ".text", "") else "code", undecoded=undecoded)


# Where each line of an HTML file starts its text, and after each tag, the converter is handed a
# mark naming the place: U+10FFFD, then the line and the column, each in two characters of plane
# 15's private use area. A page that uses those code points itself is converted without marks,
# its citations the converted text's lines.
_MARK = "\U0010fffd"
_MARK_BASE = 0xF0000
_MARK_DIGITS = 0xFFFE
_DIGIT = "([\U000f0000-\U000ffffd])"


class _Html(NamedTuple):
    marked: re.Pattern[str]
    private: re.Pattern[str]
    raw_text: re.Pattern[str]
    tag_start: re.Pattern[str]
    link_tag: re.Pattern[str]
    lead: re.Pattern[str]
    line_ink: re.Pattern[str]


@functools.cache
def _html() -> _Html:
    """The patterns of the line marks, compiled by the first HTML file read: a search, which
    imports this module, needs none of them."""
    return _Html(
        re.compile(_MARK + _DIGIT * 4),
        re.compile("[\U000f0000-\U0010ffff]"),
        re.compile(r"<(script|style)\b", re.IGNORECASE),
        re.compile(r"</?[A-Za-z!?]"),
        re.compile(r"<a[\s>]", re.IGNORECASE),
        re.compile(r"[ \t\f\r\n]*"),
        re.compile(r"(?:\r\n|\r|\n)[ \t\f]*(?=\S)"),
    )


def html_text(html: str) -> tuple[str, list[tuple[int, int, int]] | None]:
    """The Markdown of a page (:func:`tether.tools.web.html_to_markdown`) and, for each of its
    lines, the lines of ``html`` (first, last) its text came from and the column on the first
    where it starts; None when they cannot be told."""
    from tether.tools.web import html_to_markdown

    patterns = _html()
    if patterns.private.search(html) or len(html) >= _MARK_DIGITS**2:
        return html_to_markdown(html), None
    out: list[str] = []
    lines: list[tuple[int, int, int]] = []
    at = (1, 1)  # the place in the file (line, column) the text so far came from
    for converted in html_to_markdown(_with_line_marks(html)).split("\n"):
        found = [(_number(a, b), _number(c, d)) for a, b, c, d in patterns.marked.findall(converted)]
        plain = patterns.marked.sub("", converted).rstrip() if found else converted
        first = min(found) if found else at
        last = max(found) if found else at
        at = last
        if not plain and (not out or not out[-1]):
            continue  # a line that held only marks: no blank line first, nor two, as the converter makes none
        out.append(plain)
        lines.append((first[0], max(first[0], last[0]), first[1]))
    while out and not out[-1]:
        out.pop()
        lines.pop()
    return "\n".join(out), lines


def _number(hi: str, lo: str) -> int:
    return (ord(hi) - _MARK_BASE) * _MARK_DIGITS + ord(lo) - _MARK_BASE


def _mark(number: int) -> str:
    return chr(_MARK_BASE + number // _MARK_DIGITS) + chr(_MARK_BASE + number % _MARK_DIGITS)


def _breaks(text: str, start: int, end: int) -> int:
    """How many line breaks (LF, CRLF, a lone CR) ``text[start:end]`` holds."""
    return text.count("\n", start, end) + text.count("\r", start, end) - text.count("\r\n", start, end)


def _with_line_marks(html: str) -> str:
    """``html`` with a line mark before the first text of each of its lines outside the markup
    (tags, comments, scripts and styles), and before the first text after each tag. Linear: each
    piece of markup is found by one search forward."""
    patterns = _html()
    parts: list[str] = []
    at, line, counted, link = 0, 1, 0, False
    line_start = 0  # where the line ``line`` starts in ``html``
    while at < len(html):
        lt = html.find("<", at)
        end = len(html) if lt < 0 else lt
        lead = patterns.lead.match(html, at, end)
        inks = [lead.end()] if lead is not None and lead.end() < end else []
        inks += [m.end() for m in patterns.line_ink.finditer(html, at, end)]
        if link:
            inks = []  # a link's text: one that is its address becomes <address> (marked, [address](address))
        for where in inks:
            breaks = _breaks(html, counted, where)
            if breaks:
                line += breaks
                line_start = max(html.rfind("\n", counted, where), html.rfind("\r", counted, where)) + 1
            counted = where
            parts.append(html[at:where])
            parts.append(_MARK + _mark(line) + _mark(where - line_start + 1))
            at = where
        parts.append(html[at:end])
        if lt < 0:
            break
        if html.startswith("<!--", lt):
            close = html.find("-->", lt + 4)
            at = len(html) if close < 0 else close + 3
        elif (raw := patterns.raw_text.match(html, lt)) is not None:
            closing = re.compile(f"</{raw.group(1)}", re.IGNORECASE).search(html, raw.end())
            close = html.find(">", closing.end()) if closing is not None else -1
            at = len(html) if close < 0 else close + 1
        elif patterns.tag_start.match(html, lt):
            close = html.find(">", lt)
            at = len(html) if close < 0 else close + 1
        else:  # a "<" in the text
            at = lt + 1
        link = patterns.link_tag.match(html, lt) is not None
        parts.append(html[lt:at])
    return "".join(parts)


def _bom_codec(data: bytes) -> str | None:
    """The UTF-16 or UTF-32 codec that ``data``'s byte-order mark names, or None."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "utf-32"
    return "utf-16" if data.startswith((b"\xff\xfe", b"\xfe\xff")) else None


def open_below(root: Path, file: Path) -> int:
    """A descriptor of ``file``, found under the folder ``root``, opened read-only without following
    a symbolic link at any step below ``root``: a file or a folder swapped for a link after the
    folder was listed (to ~/.ssh, say) is an OSError, never read. A named pipe is not waited on."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    parts = file.relative_to(root).parts
    here = os.open(root, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            below = os.open(part, flags | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=here)
            os.close(here)
            here = below
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=here)
    finally:
        os.close(here)


def _pdf(path: Path, max_pages: int, stream: BinaryIO | None = None, max_bytes: int | None = None) -> Document:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as exc:  # pragma: no cover - pypdf is a dependency
        raise Skipped("reading PDF needs pypdf (pip install pypdf)") from exc
    try:
        reader = PdfReader(stream if stream is not None else str(path))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:
                raise Skipped("an encrypted PDF (remove the password first)") from exc
            if not opened:
                raise Skipped("an encrypted PDF (remove the password first)")
        pages, cut = _pdf_pages(reader, max_pages, MAX_PDF_CONTENT if max_bytes is None else max_bytes)
        meta: Any = reader.metadata
        title = str(meta.title).strip() if meta is not None and meta.title else path.name
    except Skipped:
        raise
    except (PyPdfError, ValueError, KeyError, OSError, TypeError, RecursionError) as exc:
        raise Skipped(f"not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if not pages:
        raise Skipped(cut or "a PDF with no text layer (scanned images need OCR first)")
    return Document("\n\n".join(pages), title, True, "pdf", cut)


def _pdf_pages(reader: Any, max_pages: int, max_content: int) -> tuple[list[str], str]:
    """The text of each page, ``# Page N`` first, up to the limits; and where it stopped, in words."""
    pages: list[str] = []
    content, total = 0, len(reader.pages)
    for n, page in enumerate(reader.pages, 1):
        if n > max_pages:
            return pages, f"only its first {max_pages} of {total} pages were read ([kb] max_pdf_pages)"
        stream = page.get_contents()
        content += 0 if stream is None else len(stream.get_data())
        if content > max_content:
            where = f"read up to page {n - 1} of {total}: its pages'" if n > 1 else "its first page's"
            return pages, (
                f"{where} content passed the {max_content / 1e6:g} MB read of one PDF (a page's "
                f"drawing instructions; the text is a small part of them): {RAISE_IT}"
            )
        text = (page.extract_text() or "").strip()
        if text:
            pages.append(f"# Page {n}\n\n{text}")
    return pages, ""


def readable(path: Path) -> bool:
    suffix = path.suffix.lower()
    return (
        suffix in TEXT_SUFFIXES
        or suffix in HTML_SUFFIXES
        or suffix == ".pdf"
        or path.name.lower() in ("readme", "license", "makefile", "dockerfile", "changelog")
    )


def iter_files(
    root: Path,
    unlisted: list[tuple[Path, str]] | None = None,
    *,
    hidden: bool = False,
    exclude: Sequence[Path] = (),
    passed: dict[str, int] | None = None,
) -> Iterator[Path]:
    """Files under ``root`` that a base should read, in a stable order, ignore files honoured.
    ``root`` itself when it is not a directory: a named pipe or a device named on purpose is
    skipped by the add, which says why. A folder that cannot be listed, or whose ignore file cannot be
    read, is passed over, and put in ``unlisted`` with the reason.

    Below ``root``, hidden entries (``.name``) are passed over unless ``hidden``, entries that hold
    credentials by their names always, and so are the folders in ``exclude`` (tether's own home);
    ``passed`` counts the entries passed over, by reason (a folder counts once)."""
    counts: dict[str, int] = passed if passed is not None else {}
    named = _named(root, counts, exclude)
    if named is not None:
        yield from named
        return
    excluded = _identities(exclude)
    # A stack of our own, not os.walk, which recurses once per level (Python 3.11): a tree nested
    # a thousand deep raised RecursionError. Each folder carries the ignore rules above it.
    stack: list[tuple[Path, list[tuple[Path, Any]]]] = [(root, [])]
    while stack:
        here, specs = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
            spec = _ignore_spec(here, [e.name for e in entries])
        except OSError as exc:  # passed over, as os.walk does; an unread ignore file's rules with it
            if unlisted is not None:
                unlisted.append((here, exc.strerror or str(exc)))
            continue
        dirnames = [e.name for e in entries if e.is_dir(follow_symlinks=False)]  # links are not followed
        filenames = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        if spec is not None:
            specs = [*specs, (here, spec)]
        for name in filenames:
            path = here / name
            if name in IGNORE_FILES or path.is_symlink():
                continue
            why = _passed_over(path, False, specs, hidden, excluded)
            if why is None:
                yield path
            else:
                counts[why] = counts.get(why, 0) + 1
        kept = []
        for d in dirnames:
            if d == ".git":
                continue  # never read, and in every repository: not worth a count
            why = _passed_over(here / d, True, specs, hidden, excluded)
            if why is None:
                kept.append(d)
            else:
                counts[why] = counts.get(why, 0) + 1
        stack += [(here / d, specs) for d in reversed(kept)]


def _named(root: Path, counts: dict[str, int], exclude: Sequence[Path]) -> Iterator[Path] | None:
    """What ``root``, named on the command line, gives when it is not a folder to walk: itself, or
    nothing when it is passed over (counted in ``counts``); None for a folder to walk."""
    if not root.is_dir():
        # named on its own: still never a credentials file (~/.aws/credentials, .env), whose
        # secrets are mostly in shapes no pattern knows (a password, AWS's secret access key)
        return _named_file(root, counts, exclude)
    # A folder named on its own is judged by where it is, links followed: ``kb add repo/*`` names a
    # cloned repository's ``assets -> ~/.docker`` too, and its config.json (registry logins) was read.
    target = Path(os.path.realpath(root))
    if any(part.lower() in _CREDENTIAL_DIRS for part in target.parts):
        why = CREDENTIALS
    elif root.is_symlink() and any(target.is_relative_to(os.path.realpath(e)) for e in exclude):
        why = EXCLUDED
    else:
        return None
    counts[why] = counts.get(why, 0) + 1
    return iter(())


def _named_file(path: Path, counts: dict[str, int], exclude: Sequence[Path] = ()) -> Iterator[Path]:
    """``path``, named on its own, unless it holds credentials or lies in a folder of ``exclude``
    (then counted in ``counts``). A link is judged by the file it leads to as well: a shell's
    ``repo/*.md`` names every link a cloned repository holds, and ``notes.md`` leading to
    ``~/.aws/credentials`` was read."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if _credential_file(path) or _credential_file(target):
        counts[CREDENTIALS] = counts.get(CREDENTIALS, 0) + 1
    elif target is not path and any(target.is_relative_to(os.path.realpath(e)) for e in exclude):
        counts[EXCLUDED] = counts.get(EXCLUDED, 0) + 1
    else:
        yield path


def _credential_file(path: Path) -> bool:
    """Whether ``path`` holds credentials by its name or by a folder it is in (``.aws``, ``.ssh``)."""
    return credential_name(path.name) or any(part.lower() in _CREDENTIAL_DIRS for part in path.absolute().parts[:-1])


def _passed_over(
    path: Path, is_dir: bool, specs: list[tuple[Path, Any]], hidden: bool, excluded: set[tuple[int, int]]
) -> str | None:
    """Why the entry at ``path`` in a folder being walked is not read, or None."""
    name = path.name
    if (name.lower() in _CREDENTIAL_DIRS) if is_dir else credential_name(name):
        return CREDENTIALS
    if name.startswith(".") and not hidden:
        return HIDDEN
    if _ignored(specs, path, is_dir):
        return IGNORED
    if is_dir:
        return EXCLUDED if excluded and _identity(path) in excluded else None
    return None if readable(path) else OTHER_KIND


def _identities(folders: Sequence[Path]) -> set[tuple[int, int]]:
    """The (device, inode) of each folder that exists, links followed: a folder is the same
    folder by any path that reaches it."""
    found = set()
    for folder in folders:
        try:
            st = os.stat(folder)
        except OSError:
            continue
        found.add((st.st_dev, st.st_ino))
    return found


def _identity(folder: Path) -> tuple[int, int] | None:
    """The (device, inode) of a folder met in the walk (never a link: links are not followed).
    One ``lstat``, where ``realpath`` took one per level of the path: a tree a thousand deep
    took minutes of system time."""
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _ignore_spec(here: Path, names: list[str]) -> Any:
    """The rules of the ignore files among ``names`` (None: no rules). One that cannot be read (a
    link to nothing, a folder, no permission) is an ``OSError`` saying so, never passed over: what it
    keeps out would be read, into a base every agent that searches it is handed."""
    import pathspec

    from tether.fileio import read_regular

    lines: list[str] = []
    for name in IGNORE_FILES:
        if name in names:
            try:  # through a link (a shared ignore file), never waiting on a named pipe
                lines += read_regular(here / name).decode("utf-8", errors="replace").splitlines()
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"its {name} cannot be read ({exc.strerror or exc}), and what it keeps out (a .env, "
                    f"keys) would have been read: nothing in this folder was. Make {name} a readable "
                    "file, or remove it, and add again",
                ) from None
    if not lines:
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines, backend=_MATCHER)
    except (ValueError, re.error):
        # A line git cannot read either ("[z-a]", a trailing backslash, a lone "!") matches nothing
        # there; here it ended the whole add with a traceback. The others still apply, in order.
        kept = [line for line in lines if _pattern_ok(pathspec, line)]
        return pathspec.GitIgnoreSpec.from_lines(kept, backend=_MATCHER) if kept else None


# RE2 matches in time linear in the name: with Python's own regular expressions, a hostile ignore
# file in a cloned repository ("*" sixty times then "b", "[a-z]*" nine times then "q") against a
# long file name kept kb add at full CPU for ever.
_MATCHER = "re2"


def _pattern_ok(pathspec: Any, line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line], backend=_MATCHER)
    except (ValueError, re.error):
        return False
    return True


def _ignored(specs: list[tuple[Path, Any]], path: Path, is_dir: bool) -> bool:
    """Whether the ignore files above ``path`` keep it out: the deepest one with a rule that matches
    it decides, as in git (a higher ``*.txt`` is taken back by a lower ``!manual.txt``; any file's
    match kept it out)."""
    suffix = "/" if is_dir else ""
    for base, spec in reversed(specs):
        include = spec.check_file(path.relative_to(base).as_posix() + suffix).include
        if include is not None:
            return bool(include)
    return False
