"""Splitting a document into chunks at line boundaries, with overlap, keeping Markdown headings.

A chunk never cuts a line in two (a line longer than the chunk size is a chunk of its own), starts
with the last lines of the previous chunk (about ``overlap`` characters) so a fact that straddles
a boundary is whole in one of them, and records the document's lines it covers (1-based,
inclusive) so an answer can cite ``document:start-end``. In Markdown, the headings above a chunk
(``Install > Linux``) are recorded with it and indexed with its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_text"]

_HEADING = re.compile(r"(#{1,6})\s+(.+)")  # the closing #s and blanks are cut by _heading
_LINES = re.compile(r"\r\n|\r|\n")
_FENCE = re.compile(r"^\s*(```|~~~)")
# The most of one heading's text a chunk's heading path carries (the heading line itself stays
# whole in the text): every chunk under a heading carries its path, so a heading of megabytes made
# a document's chunks quadratic in its size.
MAX_HEADING = 200


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    text: str
    heading: str = ""  # "Install > Linux": the Markdown headings the chunk sits under
    # The last of them whole ("Settings > Network" under "Manual" is a heading of its own, which
    # the path cannot tell); "" when the chunk was made by hand: the path's last part then
    section: str = ""

    @property
    def indexed_text(self) -> str:
        """What search sees: the heading path, then the text."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


def chunk_text(text: str, *, size: int = 512, overlap: int = 64, markdown: bool = False) -> list[Chunk]:
    if size <= 0 or overlap < 0 or overlap >= size:
        raise ValueError(f"chunk size must be > 0 and overlap in [0, size): got size={size}, overlap={overlap}")
    # The lines are read as the chunks need them, and those behind the chunk being made are let go:
    # a list of every line (and of each one's heading path) took 500 MB for 20 MB of short lines.
    lines = _Window(text, markdown)
    chunks: list[Chunk] = []
    start = 0
    while True:
        while (first := lines.get(start)) is not None and not first.strip():
            start += 1  # a chunk never starts with blank lines
            lines.forget(start)
        lines.forget(start)
        if first is None:
            break
        end, used = start, 0
        while (line := lines.get(end)) is not None:
            length = len(line) + 1
            if end > start and (used + length > size or (lines.starts_section(end) and used >= size // 4)):
                break  # full; or a new Markdown section starts a new chunk, unless this one is still tiny
            used += length
            end += 1
        body = "\n".join(lines.between(start, end)).rstrip()
        last = end
        while last > start + 1 and not lines.text(last - 1).strip():
            last -= 1
        if body.strip() and (not chunks or last > chunks[-1].end_line):  # a chunk that adds no line is none
            chunks.append(Chunk(start + 1, last, body, *lines.heading(start)))
        if line is None:
            break
        # No overlap across a heading: the next chunk belongs to its own section.
        start = end if lines.starts_section(end) else _overlap_start(lines, start, end, size, overlap)
    return chunks


# How much text the lines are read at a time: split by the regex's own loop, a block at a time, as
# fast as one split of the whole text (a Python step per line took twice as long)
_BLOCK = 65_536


class _Window:
    """The lines of a text, split at LF, CRLF and a lone CR only (an editor's lines:
    splitlines() also breaks at ^L), by number from 0 and read as they are asked for, a block at a
    time; in Markdown with the path of headings above each (fenced code is not a heading). The
    lines before the number given to :meth:`forget` are let go: a list of every line (and one of
    each one's heading path) took 500 MB for 20 MB of short lines."""

    def __init__(self, text: str, markdown: bool) -> None:
        self._text, self._markdown = text, markdown
        self._read = 0  # where the text not yet split starts
        self._first = 0  # the number of the first line held
        self._lines: list[str] = []
        self._paths: list[str] = []  # in Markdown: each line's heading path
        self._sections: list[str] = []  # and the last heading of it, whole
        self._stack: list[tuple[int, str]] = []
        self._path, self._section, self._fenced = "", "", False
        self._new: list[bool] = []  # and whether it is under other headings than the line before

    def get(self, n: int) -> str | None:
        """Line ``n``, or None past the last (the empty end after a last line break is none)."""
        at = n - self._first
        while at >= len(self._lines):
            if self._read >= len(self._text):
                return None
            self._split()
        return self._lines[at]

    def text(self, n: int) -> str:
        line = self.get(n)
        assert line is not None, n
        return line

    def between(self, start: int, end: int) -> list[str]:
        """Lines ``start`` to ``end - 1``, all read."""
        return self._lines[start - self._first : end - self._first]

    def heading(self, n: int) -> tuple[str, str]:
        """Line ``n``'s heading path and the last heading of it."""
        if not self._markdown:
            return "", ""
        self.get(n)
        return self._paths[n - self._first], self._sections[n - self._first]

    def starts_section(self, n: int) -> bool:
        """Whether line ``n`` is under other headings than the line before it."""
        return self._markdown and self.get(n) is not None and self._new[n - self._first]

    def forget(self, n: int) -> None:
        """Let go of the lines before ``n`` (in one go once they are half of those held)."""
        dead = n - self._first
        if dead > 0 and 2 * dead >= len(self._lines):
            if self._markdown:
                del self._paths[:dead], self._sections[:dead], self._new[:dead]
            del self._lines[:dead]
            self._first = n

    def _split(self) -> None:
        """The next block of lines: up to the first line break past ``_BLOCK`` characters more."""
        after = _LINES.search(self._text, self._read + _BLOCK)
        cut = after.end() if after is not None else len(self._text)
        lines = _LINES.split(self._text[self._read : cut])
        if lines[-1] == "":
            lines.pop()  # the start of the next line (or nothing, after the text's last line break)
        self._read = cut
        self._lines += lines
        if self._markdown:
            self._headings(lines)

    def _headings(self, lines: list[str]) -> None:
        """The heading paths of ``lines``, the next lines of the text."""
        stack, path, section, fenced = self._stack, self._path, self._section, self._fenced
        paths, sections, new = self._paths, self._sections, self._new
        for line in lines:
            if _FENCE.match(line):
                fenced = not fenced
            found = None if fenced else _heading(line)
            before = path
            if found:
                level, title = found
                if len(title) > MAX_HEADING:
                    title = title[: MAX_HEADING - 1].rstrip() + "…"
                stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
                # one string for the lines under one heading: a new copy per line took gigabytes
                path, section = " > ".join(t for _, t in stack), title
            paths.append(path)
            sections.append(section)
            new.append(path != before)
        self._stack, self._path, self._section, self._fenced = stack, path, section, fenced


def _overlap_start(lines: _Window, start: int, end: int, size: int, overlap: int) -> int:
    """Where the chunk after lines ``start`` to ``end - 1`` starts: back over whole lines worth
    about ``overlap`` characters, but never so far that it could not reach past ``end``."""
    back, carried = end, 0
    while back - 1 > start and carried + len(lines.text(back - 1)) + 1 <= overlap:
        back -= 1
        carried += len(lines.text(back)) + 1
    while back < end and carried + len(lines.text(end)) + 1 > size:  # the next line is long: carry less
        carried -= len(lines.text(back)) + 1
        back += 1
    return back


def _heading(line: str) -> tuple[int, str] | None:
    """A Markdown heading's level and text, its closing ``#``s and blanks cut (``## Using C#``
    keeps its ``#``). In Python, not one regex: ``(.+?)(?:\\s+#+)?\\s*$`` tried every split of a
    line's blanks, so a heading padded with 20,000 spaces took 4 s to read (quadratic)."""
    m = _HEADING.fullmatch(line)
    if m is None:
        return None
    text = m.group(2)
    trimmed = text.rstrip()
    closed = trimmed.rstrip("#")
    if closed != trimmed and closed[:1] and closed[-1].isspace() and closed.strip():
        trimmed = closed.rstrip()  # "## Title ##"
    return len(m.group(1)), trimmed or text[:1]
