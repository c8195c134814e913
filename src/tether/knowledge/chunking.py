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
    lines = _LINES.split(text)  # only \n, \r\n and \r: an editor's lines (splitlines() also breaks at ^L)
    if lines and lines[-1] == "":
        lines.pop()
    headings, sections = _heading_paths(lines) if markdown else ([""] * len(lines), [""] * len(lines))
    starts_section = [markdown and h != (headings[i - 1] if i else "") for i, h in enumerate(headings)]
    chunks: list[Chunk] = []
    start = 0
    while start < len(lines):
        while start < len(lines) and not lines[start].strip():
            start += 1  # a chunk never starts with blank lines
        if start >= len(lines):
            break
        end, used = start, 0
        while end < len(lines) and (end == start or used + len(lines[end]) + 1 <= size):
            if end > start and starts_section[end] and used >= size // 4:
                break  # a new Markdown section starts a new chunk, unless this one is still tiny
            used += len(lines[end]) + 1
            end += 1
        body = "\n".join(lines[start:end]).rstrip()
        last = end
        while last > start + 1 and not lines[last - 1].strip():
            last -= 1
        if body.strip() and (not chunks or last > chunks[-1].end_line):  # a chunk that adds no line is none
            chunks.append(Chunk(start + 1, last, body, headings[start], sections[start]))
        if end >= len(lines):
            break
        # No overlap across a heading: the next chunk belongs to its own section.
        start = end if starts_section[end] else _overlap_start(lines, start, end, size, overlap)
    return chunks


def _overlap_start(lines: list[str], start: int, end: int, size: int, overlap: int) -> int:
    """Where the chunk after ``lines[start:end]`` starts: back over whole lines worth about
    ``overlap`` characters, but never so far that it could not reach past ``end``."""
    back, carried = end, 0
    while back - 1 > start and carried + len(lines[back - 1]) + 1 <= overlap:
        back -= 1
        carried += len(lines[back]) + 1
    while back < end and carried + len(lines[end]) + 1 > size:  # the next line is long: carry less
        carried -= len(lines[back]) + 1
        back += 1
    return back


def _heading_paths(lines: list[str]) -> tuple[list[str], list[str]]:
    """For each line, the path of Markdown headings above it and the last of them (fenced code is
    not a heading)."""
    out: list[str] = []
    last: list[str] = []
    stack: list[tuple[int, str]] = []
    path = ""  # one string for the lines under one heading: a new copy per line took gigabytes
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        found = None if fenced else _heading(line)
        if found:
            level, title = found
            if len(title) > MAX_HEADING:
                title = title[: MAX_HEADING - 1].rstrip() + "…"
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
            path = " > ".join(t for _, t in stack)
        out.append(path)
        last.append(stack[-1][1] if stack else "")
    return out, last


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
