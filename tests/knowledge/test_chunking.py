"""Chunking: whole lines, overlap, line numbers a citation can trust, Markdown headings."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.knowledge import Chunk, chunk_text


def editor_lines(text: str) -> list[str]:
    """The lines of ``text`` as an editor, ``grep -n`` or ``sed -n`` count them: split at LF,
    CRLF or a lone CR, nothing else."""
    return re.split(r"\r\n|\r|\n", text)


def check_against_text(text: str, chunks: list[Chunk]) -> None:
    """Each chunk is exactly the lines it cites (no line cut), starts and ends on a non-blank line,
    and every non-blank line of the text is in at least one chunk."""
    lines = editor_lines(text)
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines), c
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line]).rstrip(), c
        assert lines[c.start_line - 1].strip() and lines[c.end_line - 1].strip(), c
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    missing = [n for n, line in enumerate(lines, 1) if line.strip() and n not in covered]
    assert not missing, f"lines in no chunk: {missing}"


def overlap_chars(lines: list[str], prev: Chunk, nxt: Chunk) -> int:
    return sum(len(lines[n - 1]) + 1 for n in range(nxt.start_line, prev.end_line + 1))


# -- lines and line numbers ---------------------------------------------------------------------


def test_short_lines_fill_chunks_that_overlap_by_whole_lines_worth_the_overlap() -> None:
    text = "\n".join(f"line {n:04d}" for n in range(1, 41))  # 9 characters + newline = 10 each
    chunks = chunk_text(text, size=100, overlap=30)
    # 10 lines fill 100 characters; the next chunk starts 3 lines (30 characters) back.
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 10), (8, 17), (15, 24), (22, 31), (29, 38), (36, 40)]
    assert chunks[1].text.splitlines()[0] == "line 0008"
    check_against_text(text, chunks)


def test_no_overlap_means_chunks_meet_end_to_end() -> None:
    text = "\n".join(f"line {n:04d}" for n in range(1, 26))
    chunks = chunk_text(text, size=100, overlap=0)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 10), (11, 20), (21, 25)]


def test_line_numbers_are_one_based_inclusive_and_skip_surrounding_blank_lines() -> None:
    text = "\n\nfirst\nsecond\n\n\nthird\n\n"
    (chunk,) = chunk_text(text, size=512, overlap=0)
    assert (chunk.start_line, chunk.end_line) == (3, 7)
    assert chunk.text == "first\nsecond\n\n\nthird"
    check_against_text(text, [chunk])


def test_crlf_gives_the_same_chunks_and_line_numbers_as_lf() -> None:
    lf = "\n".join(f"row {n} of the table, with some words" for n in range(1, 30))
    crlf = lf.replace("\n", "\r\n")
    a, b = chunk_text(lf, size=120, overlap=40), chunk_text(crlf, size=120, overlap=40)
    assert a == b and len(a) > 3
    assert not any("\r" in c.text for c in b)
    check_against_text(crlf, b)


def test_a_line_longer_than_the_chunk_is_a_chunk_of_its_own_never_cut() -> None:
    long = "y" * 700
    text = "before\n" + long + "\nafter"
    chunks = chunk_text(text, size=100, overlap=20)
    assert Chunk(2, 2, long) in chunks
    check_against_text(text, chunks)


@pytest.mark.parametrize("overlap", [0, 1, 50, 98, 99])
def test_chunking_terminates_and_moves_forward_with_any_overlap(overlap: int) -> None:
    text = "\n".join(("z" * 250 if n % 7 == 0 else f"item {n} with text") for n in range(60))
    chunks = chunk_text(text, size=100, overlap=overlap)
    starts = [c.start_line for c in chunks]
    assert starts == sorted(set(starts))
    check_against_text(text, chunks)


@pytest.mark.parametrize("text", ["", "\n", "\n\n  \n\t\n", "   ", "\r\n\r\n"])
def test_blank_text_has_no_chunks(text: str) -> None:
    assert chunk_text(text, size=10, overlap=5) == []


def test_every_chunk_adds_lines_the_previous_one_did_not_have() -> None:
    # Nine short lines, then a line too long to join them: the chunk after the first must not be
    # a copy of lines the first already holds, and there must not be one such copy per line.
    lines = ["a" * 10] * 10 + ["b" * 95]
    chunks = chunk_text("\n".join(lines), size=100, overlap=60)
    check_against_text("\n".join(lines), chunks)
    ends = [c.end_line for c in chunks]
    assert ends == sorted(set(ends)), (
        f"chunks contained in the one before: {[(c.start_line, c.end_line) for c in chunks]}"
    )


def test_a_form_feed_or_unicode_line_separator_does_not_shift_line_numbers() -> None:
    # A page break (^L) on a line of its own, as in GNU-style sources, and U+2028 inside a line:
    # neither is a line break for an editor or `sed -n`, so a citation must not count them.
    text = "intro\n\x0c\nsection two\nA sentence\u2028with a separator.\nfinal line"
    chunks = chunk_text(text, size=512, overlap=0)
    last = chunks[-1]
    assert last.end_line == 5, f"'final line' is line 5 of the file, the chunk says {last.end_line}"
    check_against_text(text, chunks)


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (-5, 0), (100, -1), (100, 100), (100, 150)])
def test_bad_size_or_overlap_is_a_value_error(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="size"):
        chunk_text("some text", size=size, overlap=overlap)


# -- Markdown -----------------------------------------------------------------------------------

GUIDE = """# Guide

Intro paragraph that is long enough to matter here.

## Install

Run the installer and follow the prompts on screen.

### Linux

Use the package manager: apt install tether-agent today.

## Usage

Call tether run with a prompt and read the answer.
"""


def test_markdown_headings_are_carried_as_a_path_and_a_section_starts_a_chunk() -> None:
    chunks = chunk_text(GUIDE, size=80, overlap=20, markdown=True)
    assert [(c.start_line, c.heading) for c in chunks] == [
        (1, "Guide"),
        (5, "Guide > Install"),
        (9, "Guide > Install > Linux"),
        (13, "Guide > Usage"),
    ]
    # No overlap across a heading: each chunk begins at its own heading line.
    assert [c.text.splitlines()[0] for c in chunks] == ["# Guide", "## Install", "### Linux", "## Usage"]
    assert chunks[2].indexed_text.startswith("Guide > Install > Linux\n### Linux")
    check_against_text(GUIDE, chunks)


def test_without_markdown_there_are_no_headings_and_no_section_breaks() -> None:
    chunks = chunk_text(GUIDE, size=512, overlap=20)
    assert len(chunks) == 1 and chunks[0].heading == ""
    assert chunks[0].indexed_text == chunks[0].text


def test_a_heading_inside_a_fenced_code_block_is_not_a_heading() -> None:
    body = "\n".join(f"echo step {n}" for n in range(12))
    text = f"# Build\n\nSteps follow.\n\n```bash\n# not a heading\n{body}\n## nor this\n```\n\n~~~\n# nor this one\n~~~\nAfter."
    chunks = chunk_text(text, size=60, overlap=10, markdown=True)
    assert len(chunks) > 3
    assert {c.heading for c in chunks} == {"Build"}
    check_against_text(text, chunks)


def test_heading_levels_pop_back_to_the_parent() -> None:
    text = "# A\n\n## B\n\n### C\n\ntext c " + "c" * 40 + "\n\n## D\n\ntext d " + "d" * 40 + "\n\n# E\n\ntext e"
    chunks = chunk_text(text, size=60, overlap=0, markdown=True)
    by_text = {c.text.splitlines()[-1][:6]: c.heading for c in chunks}
    assert by_text["text c"] == "A > B > C"
    assert by_text["text d"] == "A > D"
    assert by_text["text e"] == "E"


def test_a_closing_hash_sequence_is_dropped_but_a_hash_in_the_title_is_kept() -> None:
    text = "## Valves ##\n\nbody one\n\n## Using C#\n\nbody two"
    headings = [c.heading for c in chunk_text(text, size=12, overlap=0, markdown=True)]
    assert headings[0] == "Valves"
    assert headings[-1] == "Using C#"


def test_a_tiny_section_joins_the_next_instead_of_making_a_one_line_chunk() -> None:
    text = "# A\n## B\n" + "\n".join(f"b line {n}" for n in range(20))
    chunks = chunk_text(text, size=200, overlap=0, markdown=True)
    assert chunks[0].start_line == 1 and chunks[0].end_line > 2


# -- properties ---------------------------------------------------------------------------------

_LINE = st.one_of(
    st.text(alphabet=st.sampled_from(list("abcxyz  #`~-*019.")), max_size=50),
    st.text(alphabet="ab ", min_size=80, max_size=260),  # sometimes longer than the chunk
    st.sampled_from(["", "   ", "# Title", "## Sub", "```", "~~~", "### Deep #"]),
)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, int, int, bool]:
    lines = draw(st.lists(_LINE, max_size=40))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(lines) + (newline if draw(st.booleans()) else "")
    size = draw(st.integers(8, 220))
    overlap = draw(st.integers(0, size - 1))
    return text, size, overlap, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(documents())
def test_property_whole_lines_right_numbers_and_nothing_left_out(doc: tuple[str, int, int, bool]) -> None:
    text, size, overlap, markdown = doc
    chunks = chunk_text(text, size=size, overlap=overlap, markdown=markdown)
    check_against_text(text, chunks)
    for c in chunks:  # only a single line longer than the size makes a chunk over the size
        assert len(c.text) <= size or c.start_line == c.end_line, c


@settings(max_examples=300, deadline=None)
@given(documents())
def test_property_overlap_is_whole_lines_within_the_overlap(doc: tuple[str, int, int, bool]) -> None:
    text, size, overlap, markdown = doc
    chunks = chunk_text(text, size=size, overlap=overlap, markdown=markdown)
    lines = editor_lines(text)
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.start_line > prev.start_line
        if nxt.start_line <= prev.end_line:
            assert overlap_chars(lines, prev, nxt) <= overlap, (prev, nxt)


@settings(max_examples=300, deadline=None)
@given(documents())
def test_property_each_chunk_moves_past_the_end_of_the_one_before(doc: tuple[str, int, int, bool]) -> None:
    text, size, overlap, markdown = doc
    chunks = chunk_text(text, size=size, overlap=overlap, markdown=markdown)
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.end_line > prev.end_line, (prev, nxt)
