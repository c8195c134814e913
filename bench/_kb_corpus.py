"""A labelled retrieval set built from the Linux man pages that Debian installs.

Real text that no one in this project wrote, installable anywhere the project runs
(``apt-get install -y manpages manpages-dev man-db groff-base``), used to measure the
knowledge base's retrieval (BM25, embeddings, hybrid) as *known-item* search.

Construction (``build()``):

* Pages: every page of sections 1, 2 and 3 that the Debian packages ``manpages`` and
  ``manpages-dev`` own, as listed in ``/var/lib/dpkg/info/<package>.list`` (so pages of
  other installed packages -- zlib, libxml2, perl modules, ... -- never enter, and the set
  is the same on every machine with the same versions of those two packages). Symbolic
  links and ``.so`` alias pages (a page that only includes another) are skipped.
* Rendering: ``man --nh --nj -l FILE`` (no hyphenation, no justification) with ``MANWIDTH=80``,
  output not a terminal, so plain UTF-8 text (any backspace overstrike left is removed). The rendered text is cached under
  ``~/.cache/tether/manpages/<package-version>/`` so a second run only reads files.
* Each page is split into its NAME section and its body. The body is the page without the
  running header (first line), the running footer (last line) and the NAME section; each
  line loses trailing blanks and up to 7 leading spaces (man's standard indent), runs of
  blank lines collapse to one. Only the body is indexed: ``Doc(doc_id, title, text)`` with
  ``doc_id`` the file's name without ``.gz`` (``read.2``) and ``title`` ``read(2)``.
* Name queries (``kind="name"``): the NAME section's names, the part before the first ``" - "``
  (``"open, openat, creat"``), unique to the page as descriptions are; the names do appear in
  the body (the SYNOPSIS), and in other pages' SEE ALSO: the identifier-like lookups a reader
  types.
* Queries: the NAME section's description, the part after the first ``" - "``
  (``read - read from a file descriptor`` -> ``"read from a file descriptor"``), whose one
  relevant document is that page: ``Query(text, doc_id)``. A description shared by more than
  one page (compared case- and space-insensitively) gives no query, nor does one of fewer
  than 3 words; those pages stay indexed as distractors.

The relevance judgment is the page's own one-line summary, and the query text is never an
indexed chunk (the NAME section is left out of the body). Index the bodies as the knowledge
base would, e.g. ``tether.knowledge.chunking.chunk_text(doc.text, size=512, overlap=64)``,
and score a document by its best chunk.

With manpages 6.03-2 and manpages-dev 6.03-2 (Debian 12): 917 page files in sections 1-3
(1,370 more are symbolic links), 11 of them ``.so`` aliases, so 906 documents (4.27 M
characters; 9,584 chunks of at most 512 characters with 64 of overlap) and 782 queries.
Rendering takes about 40 s on 2 cores the first time, 0.3 s from the cache. ``max_pages``
keeps the first N page files in sorted order (with their queries) for a quick run.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CorpusMissing", "Doc", "Query", "build"]

PACKAGES = ("manpages", "manpages-dev")
SECTIONS = ("1", "2", "3")
INSTALL_HINT = "apt-get install -y manpages manpages-dev man-db groff-base"
# The large set (``build(large=True)``, about 4,500 pages): more of Debian's documentation
# packages, every section, so other authors, styles and vocabularies than the Linux man-pages
# project's (OpenSSL's API, Perl's manuals and modules, Tcl/Tk, Xlib and Xt, git, systemd,
# coreutils, util-linux, iproute2, libbsd, PAM, dpkg, e2fsprogs).
LARGE_PACKAGES = (
    "manpages",
    "manpages-dev",
    "libssl-doc",
    "perl-doc",
    "tcl8.6-doc",
    "tk8.6-doc",
    "libx11-doc",
    "git-man",
    "openssl",
    "systemd",
    "coreutils",
    "util-linux",
    "iproute2",
    "libbsd-dev",
    "libmd-dev",
    "libxt-dev",
    "libxext-dev",
    "libxft-dev",
    "libpam-modules",
    "libtirpc-dev",
    "libtasn1-6-dev",
    "dpkg-dev",
    "libdpkg-perl",
    "e2fsprogs",
    "passwd",
)
LARGE_SECTIONS = ("1", "2", "3", "4", "5", "6", "7", "8")
LARGE_INSTALL_HINT = f"apt-get install -y --no-install-recommends {' '.join(LARGE_PACKAGES)} man-db groff-base"
_DPKG_INFO = Path("/var/lib/dpkg/info")
_DPKG_STATUS = Path("/var/lib/dpkg/status")
_CACHE = Path.home() / ".cache" / "tether" / "manpages"
_RENDER_VERSION = "r1"  # bump when the rendering changes, so old caches are not reused
_PAGE = re.compile(r"^/usr/share/man/man([0-9])/([^/]+)\.([0-9][a-z]*)\.gz$")
_OVERSTRIKE = re.compile(r".\x08")
_HEADING = re.compile(r"^[A-Z][A-Z0-9 ,/()-]*$")  # a section heading, flush left: NAME, SYNOPSIS, ...


@dataclass(frozen=True)
class Doc:
    doc_id: str  # "read.2"
    title: str  # "read(2)"
    text: str  # the page's body: everything but the NAME section, header and footer
    package: str = ""  # the Debian package that owns the page


@dataclass(frozen=True)
class Query:
    text: str  # the page's one-line description: "read from a file descriptor"
    doc_id: str  # the one relevant document
    kind: str = "description"  # or "name": the names the page documents, "open, openat, creat"
    package: str = ""  # the Debian package of its page


class CorpusMissing(RuntimeError):
    """The man pages (or the tools to render them) are not installed."""


def build(max_pages: int | None = None, *, large: bool = False) -> tuple[list[Doc], list[Query]]:
    """The documents (bodies only) and the known-item queries (see the module's docstring);
    ``large``: the large set's packages and sections."""
    packages, sections = (LARGE_PACKAGES, LARGE_SECTIONS) if large else (PACKAGES, SECTIONS)
    owned = _page_files(packages, sections, LARGE_INSTALL_HINT if large else INSTALL_HINT)
    files = [path for path, _ in owned]
    if max_pages is not None:
        files = files[:max_pages]
    key = f"{_versions(packages)}_{_RENDER_VERSION}"
    if len(key) > 200:  # too long for one file name: the versions' digest names the cache instead
        key = hashlib.sha1(key.encode()).hexdigest() + f"_{_RENDER_VERSION}"
    cache = _CACHE / key
    texts = _render_all(files, cache)
    docs: list[Doc] = []
    descriptions: dict[str, str] = {}
    names: dict[str, str] = {}
    package_of = dict(owned)
    seen: set[str] = set()
    for path, rendered in zip(files, texts, strict=True):
        named, description, body = _split(rendered)
        stem = path.name[: -len(".gz")]
        if not body.strip() or stem in seen:  # the same page name in two packages: the first is kept
            continue
        seen.add(stem)
        page, _, section = stem.rpartition(".")
        docs.append(Doc(stem, f"{page}({section})", body, package_of[path]))
        if description:
            descriptions[stem] = description
        if named:
            names[stem] = named
    of = {d.doc_id: d.package for d in docs}
    queries = _unique(descriptions, "description", 3) + _unique(names, "name", 1)
    return docs, [Query(q.text, q.doc_id, q.kind, of[q.doc_id]) for q in queries]


def _unique(texts: dict[str, str], kind: str, min_words: int) -> list[Query]:
    """One query per text that no other page shares and that has ``min_words`` words or more."""
    seen: dict[str, int] = {}
    for d in texts.values():
        seen[_norm(d)] = seen.get(_norm(d), 0) + 1
    return [
        Query(text, doc_id, kind)
        for doc_id, text in texts.items()
        if seen[_norm(text)] == 1 and len(text.split()) >= min_words
    ]


def _page_files(packages: tuple[str, ...], sections: tuple[str, ...], hint: str) -> list[tuple[Path, str]]:
    """Each page file of ``packages`` in ``sections``, with its package, in a stable order."""
    lists = {p: _package_list(p) for p in packages}
    missing = [p for p, listed in lists.items() if listed is None]
    if missing:
        raise CorpusMissing(
            f"the man pages for the retrieval set are not installed (Debian package(s) {', '.join(missing)} "
            f"missing); as root run: {hint}"
        )
    files: list[tuple[Path, str]] = []
    for package, listed in lists.items():
        assert listed is not None
        for line in listed.read_text().splitlines():
            m = _PAGE.match(line)
            if not m or m.group(1) not in sections:
                continue
            path = Path(line)
            if path.is_symlink() or not path.is_file():
                continue
            files.append((path, package))
    if not files:
        raise CorpusMissing(
            "dpkg lists the man-page packages but no page of their sections is on disk (an image that strips "
            f"/usr/share/man? see /etc/dpkg/dpkg.cfg.d/); reinstall with: {hint} --reinstall"
        )
    return sorted(files, key=lambda f: (f[0].parent.name, f[0].name))


def _package_list(package: str) -> Path | None:
    """dpkg's list of the files ``package`` owns (``NAME.list``, or ``NAME:ARCH.list``)."""
    plain = _DPKG_INFO / f"{package}.list"
    if plain.is_file():
        return plain
    return next(iter(sorted(_DPKG_INFO.glob(f"{package}:*.list"))), None)


def _versions(packages: tuple[str, ...] = PACKAGES) -> str:
    """'manpages-6.03-2_manpages-dev-6.03-2': the cache is per version of the packages."""
    versions = dict.fromkeys(packages, "unknown")
    try:
        package = None
        for line in _DPKG_STATUS.read_text(errors="replace").splitlines():
            if line.startswith("Package: "):
                package = line[len("Package: ") :].strip()
            elif line.startswith("Version: ") and package in versions:
                versions[package] = line[len("Version: ") :].strip()
    except OSError:
        pass
    return "_".join(f"{p}-{v}" for p, v in versions.items()).replace(":", "+")


def _is_alias(path: Path) -> bool:
    """A page whose only content is a '.so other/page' include."""
    with gzip.open(path, "rt", errors="replace") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip() and not ln.startswith(('.\\"', "'\\\""))]
    return len(lines) <= 2 and any(ln.startswith(".so ") for ln in lines)


def _render_all(files: list[Path], cache: Path) -> list[str]:
    cache.mkdir(parents=True, exist_ok=True)

    def one(path: Path) -> str:
        out = cache / (path.name[: -len(".gz")] + ".txt")
        if out.is_file():
            return out.read_text()
        text = "" if _is_alias(path) else _render(path)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(out)
        return text

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(one, files))


def _render(path: Path, timeout_s: float = 60) -> str:
    """The page as text; "" for one that groff does not finish within ``timeout_s`` (a few
    translated pages loop). The whole process group is stopped then: ``man`` runs groff's
    programs as its children, which would otherwise keep the pipe open."""
    env = {**os.environ, "MANWIDTH": "80", "COLUMNS": "80", "MANPAGER": "cat", "PAGER": "cat", "LC_ALL": "C.UTF-8"}
    env.pop("MAN_KEEP_FORMATTING", None)
    try:
        proc = subprocess.Popen(
            ["man", "--nh", "--nj", "-l", str(path)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise CorpusMissing(
            f"the 'man' command is missing, needed to render the man pages; as root run: {INSTALL_HINT}"
        ) from None
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return ""
    text = out.decode("utf-8", "replace")
    if proc.returncode != 0 and not text.strip():
        raise CorpusMissing(
            f"could not render {path}: {err.decode('utf-8', 'replace').strip()[:300]} "
            f"(is groff installed? {INSTALL_HINT})"
        )
    return _OVERSTRIKE.sub("", text)


def _split(rendered: str) -> tuple[str, str, str]:
    """(names, description, body) of a rendered page."""
    lines = [ln.rstrip() for ln in rendered.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) < 3:
        return "", "", ""
    lines = lines[1:-1]  # the running header ("read(2)  System Calls Manual  read(2)") and footer
    name_lines: list[str] = []
    body: list[str] = []
    in_name = False
    for line in lines:
        if _HEADING.match(line):
            in_name = line == "NAME"
            if in_name:
                continue
        if in_name:
            name_lines.append(line.strip())
        else:
            body.append(_dedent(line))
    name = " ".join(x for x in name_lines if x)
    names, sep, description = name.partition(" - ")
    description = " ".join(description.split()) if sep else ""
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip("\n")
    return names.strip(), description, text


def _dedent(line: str) -> str:
    stripped = line.lstrip(" ")
    return line[min(7, len(line) - len(stripped)) :]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


if __name__ == "__main__":
    import sys
    import time

    t0 = time.perf_counter()
    try:
        docs, queries = build(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    except CorpusMissing as e:
        raise SystemExit(str(e)) from None
    chars = sum(len(d.text) for d in docs)
    print(f"{len(docs)} documents ({chars:,} characters), {len(queries)} queries, {time.perf_counter() - t0:.1f}s")
    for q in queries[:5]:
        print(f"  {q.doc_id:24} {q.text}")
