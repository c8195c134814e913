"""HTML to Markdown for ``web_fetch`` and the knowledge base's HTML reader.

The same Markdown BeautifulSoup and markdownify 1.2 made (ATX headings, images dropped, text
escaped as markdownify escapes it), made from lxml's tree directly: BeautifulSoup built a Python
object per node from lxml's parse and markdownify searched the tree above each tag (``find_parent``)
and beside each string, 41-46 µs of CPU an element; here each node is made once, with what the
rules ask of its ancestors, and each rule reads its neighbours by index: 5-8 µs
(bench/html_to_markdown.py runs both and checks their outputs are equal).

The tree is BeautifulSoup's: a string that is all white space outside ``<pre>`` and ``<textarea>``
is one space or one line break; the text around a removed element stays two strings (they are
converted apart, as they were); strings inside ``<rt>`` and ``<rp>``, and processing instructions,
are text that is not calmed; comments are kept for the tests of their neighbours only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["html_to_markdown"]

_DROPPED = frozenset({"script", "style", "noscript", "svg", "iframe", "template"})
_CONTAINERS = frozenset({"rt", "rp", "script", "style", "template"})  # BeautifulSoup's string classes
_ASCII_SPACES = "\x20\x0a\x09\x0c\x0d"
_BLOCK = frozenset(
    {"p", "blockquote", "article", "div", "section", "ol", "ul", "li", "dl", "dt", "dd"}
    | {"table", "thead", "tbody", "tfoot", "tr", "td", "th"}
)
_HEADING = re.compile(r"h(\d+)")

# _calm_whitespace's runs (tether.tools.web): markdownify's regexes rescan a long run of white
# space from each of its characters, so runs are shortened first.
_SPACES = re.compile(r"[\t \r\n]+")
_SPACES_2 = re.compile(r"[\t \r\n]{2,}")
_PRE_RUN = 64
_PRE_SPACES = re.compile(rf"[ \n]{{{_PRE_RUN + 1},}}")

# markdownify 1.2's patterns
_LINE_WITH_CONTENT = re.compile(r"^(.*)", flags=re.MULTILINE)
_WHITESPACE = re.compile(r"[\t ]+")
_ALL_WHITESPACE = re.compile(r"[\t \r\n]+")
_NEWLINE_WHITESPACE = re.compile(r"[\t \r\n]*[\r\n][\t \r\n]*")
_PRE_LSTRIP = re.compile(r"^[ \n]*\n")
_PRE_RSTRIP = re.compile(r"[ \n]*$")
_BACKTICKS = re.compile(r"`+")
_CONVERT_NAME = re.compile(r"[\[\]:-]")


class _Comment(str):
    """A comment: never shown; its neighbours' rules see it (an empty one counts as nothing)."""

    __slots__ = ()


class _Special(str):
    """Text BeautifulSoup gave a class of its own (a processing instruction, a string in ``<rt>``
    or ``<rp>``): converted as text, but not calmed, and not part of the title's text."""

    __slots__ = ()


class _Node:
    __slots__ = ("attrs", "block", "in_pre", "index", "kids", "name", "ordinals", "parent", "spaced")

    def __init__(self, name: str, attrs: dict[str, str], parent: _Node | None, in_pre: bool) -> None:
        self.name = name
        self.attrs = attrs
        self.parent = parent
        self.in_pre = in_pre  # an ancestor is a <pre>
        self.kids: list[Any] = []  # _Node, str, _Comment, _Special
        self.index = 0  # where it is in its parent's kids
        # markdownify's should_remove_whitespace_inside, and _outside (a <pre> too)
        self.block = name in _BLOCK or _HEADING.match(name) is not None
        self.spaced = self.block or name == "pre"
        self.ordinals: list[int] | None = None  # per kid, how many <li> come before it

    def get(self, key: str) -> str | None:
        return self.attrs.get(key)

    def tags(self) -> list[_Node]:
        return [k for k in self.kids if type(k) is _Node]

    def find_all(self, names: frozenset[str]) -> list[_Node]:
        """Descendants with one of ``names``, in document order."""
        found: list[_Node] = []
        stack = list(reversed(self.tags()))  # popped in document order
        while stack:
            node = stack.pop()
            if node.name in names:
                found.append(node)
            stack.extend(reversed(node.tags()))
        return found

    def previous_tag(self) -> _Node | None:
        if self.parent is None:
            return None
        kids = self.parent.kids
        for i in range(self.index - 1, -1, -1):
            if type(kids[i]) is _Node:
                return kids[i]  # type: ignore[no-any-return]
        return None

    def items_before(self) -> int:
        """How many <li> come before this node among its parent's kids."""
        parent = self.parent
        assert parent is not None
        if parent.ordinals is None:
            count, parent.ordinals = 0, []
            for kid in parent.kids:
                parent.ordinals.append(count)
                if type(kid) is _Node and kid.name == "li":
                    count += 1
        return parent.ordinals[self.index]


class _Builder:
    """An lxml parser target that builds the tree BeautifulSoup's lxml builder builds from the same
    events (a DOCTYPE in the middle of a page splits the text around it there too), the dropped
    elements left out (BeautifulSoup's tree, decomposed)."""

    def __init__(self) -> None:
        self.doc = _Node("[document]", {}, None, False)
        self.open: list[_Node | None] = [self.doc]  # None: inside a dropped element
        self.pending: list[str] = []
        self.preserving = 0  # open <pre> and <textarea>: their white space is kept
        self.containers: list[str] = []  # open <rt>, <rp> (and dropped elements' names)

    def start(self, tag: str, attrib: Any, nsmap: Any = None) -> None:
        self.end_data()
        parent = self.open[-1]
        node = None
        if parent is not None and tag not in _DROPPED:
            node = _Node(tag, dict(attrib) if attrib else {}, parent, parent.in_pre or parent.name == "pre")
            node.index = len(parent.kids)
            parent.kids.append(node)
        self.open.append(node)
        if tag in ("pre", "textarea"):
            self.preserving += 1
        if tag in _CONTAINERS:
            self.containers.append(tag)

    def end(self, tag: str) -> None:
        self.end_data()
        self.open.pop()
        if tag in ("pre", "textarea"):
            self.preserving -= 1
        if tag in _CONTAINERS:
            self.containers.pop()

    def data(self, data: str) -> None:
        self.pending.append(data)

    def comment(self, text: str) -> None:
        self.end_data()
        self.pending.append(text)
        self.end_data(_Comment)

    def pi(self, target: str, data: str) -> None:
        self.end_data()
        self.pending.append(target + " " + data)
        self.end_data(_Special)

    def doctype(self, name: str | None, pubid: str | None, system: str | None) -> None:
        value = name or ""
        if pubid is not None:
            value += f' PUBLIC "{pubid}"' + (f' "{system}"' if system is not None else "")
        elif system is not None:
            value += f' SYSTEM "{system}"'
        self.end_data()
        self.pending.append(value)
        self.end_data(_Comment)  # markdownify passes over a doctype as over a comment

    def close(self) -> _Node:
        self.end_data()
        return self.doc

    def end_data(self, kind: type[str] = str) -> None:
        """BeautifulSoup's endData: the text since the last event becomes one string."""
        if not self.pending:
            return
        text = "".join(self.pending)
        self.pending = []
        # A string of ASCII white space only, outside <pre> and <textarea>, is one line break if
        # it holds one, else one space (an empty comment included).
        if not self.preserving and not text.strip(_ASCII_SPACES):
            text = "\n" if "\n" in text else " "
        parent = self.open[-1]
        if parent is None:
            return
        if kind is str and self.containers and self.containers[-1] in ("rt", "rp"):
            kind = _Special
        parent.kids.append(text if kind is str else kind(text))


def _tree(html: str) -> _Node | None:
    """The document as BeautifulSoup's lxml builder made it, the dropped elements left out; None
    when lxml refuses it."""
    from lxml import etree  # type: ignore[import-untyped]  # (no stubs installed)

    if html[:1] == "\ufeff":
        html = html[1:]
    parser = etree.HTMLParser(target=_Builder(), recover=True)
    try:
        parser.feed(html)
        doc: _Node = parser.close()
    except (UnicodeDecodeError, LookupError, etree.ParserError):
        return None
    return doc


def _first(doc: _Node, name: str) -> _Node | None:
    stack = list(reversed(doc.tags()))
    while stack:
        node = stack.pop()
        if node.name == name:
            return node
        stack.extend(reversed(node.tags()))
    return None


def _calm(text: str, in_pre: bool) -> str:
    """tether.tools.web's rule for a plain string: outside <pre> a run of white space is what
    markdownify makes of it anyway (a line break if it holds one, else a space); inside, a run
    longer than 64 is cut to 64."""
    if in_pre:
        return _PRE_SPACES.sub(lambda m: m.group()[:_PRE_RUN], text)
    if _SPACES_2.search(text):
        return _SPACES.sub(lambda m: "\n" if "\n" in m.group() or "\r" in m.group() else " ", text)
    return text


def _title(title: _Node, calmed: Callable[[_Node], bool]) -> str:
    """``title.get_text(strip=True)``: its plain strings, each stripped, joined."""
    parts: list[str] = []

    def walk(node: _Node) -> None:
        for kid in node.kids:
            if type(kid) is _Node:
                walk(kid)
            elif type(kid) is str:
                text = _calm(kid, node.name == "pre" or node.in_pre) if calmed(node) else kid
                text = text.strip()
                if text:
                    parts.append(text)

    walk(title)
    return "".join(parts)


def html_to_markdown(html: str) -> str:
    """Readable Markdown from a page: scripts and styles dropped, <main>/<article> preferred,
    the <title> as the first heading."""
    doc = _tree(html)
    if doc is None:
        return ""
    main = _first(doc, "main") or _first(doc, "article") or _first(doc, "body") or doc
    title_node = _first(doc, "title")
    title = ""
    if title_node is not None:
        title = _title(title_node, lambda node: _within(node, main))
    text = _Converter().tag(main, frozenset()).strip()
    lines = [ln.rstrip() for ln in text.splitlines()]
    compact = "\n".join(ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1]))
    return f"# {title}\n\n{compact}" if title else compact


def _within(node: _Node | None, main: _Node) -> bool:
    while node is not None:
        if node is main:
            return True
        node = node.parent
    return False


# --- markdownify's rules ------------------------------------------------------------------------


def _outside(el: Any) -> bool:
    """markdownify's should_remove_whitespace_outside: a block element or a <pre> (a string is not)."""
    return type(el) is _Node and el.spaced


def _content(el: Any) -> bool:
    """markdownify's _is_block_content_element."""
    if type(el) is _Node:
        return True
    if type(el) is _Comment or el is None:
        return False
    return bool(el.strip() != "")


def _chomp(text: str) -> tuple[str, str, str]:
    prefix = " " if text and text[0] == " " else ""
    suffix = " " if text and text[-1] == " " else ""
    return prefix, suffix, text.strip()


class _Converter:
    """markdownify.MarkdownConverter(heading_style="ATX", strip=["img"]) over :class:`_Node`."""

    def __init__(self) -> None:
        self.below: dict[tuple[frozenset[str], str], frozenset[str]] = {}
        self.rules: dict[str, Callable[[_Node, str, frozenset[str]], str] | None] = {}

    def tag(self, node: _Node, parent_tags: frozenset[str]) -> str:
        kids = node.kids
        last = len(kids) - 1
        remove_inside = node.block
        name = node.name
        inner = self.below.get((parent_tags, name))
        if inner is None:
            below = set(parent_tags)
            below.add(name)
            if _HEADING.match(name) is not None or name in ("td", "th"):
                below.add("_inline")
            if name in ("pre", "code", "kbd", "samp"):
                below.add("_noformat")
            inner = self.below[(parent_tags, name)] = frozenset(below)
        strings: list[str] = []
        for i, kid in enumerate(kids):
            kind = type(kid)
            if kind is _Node:
                out = self.tag(kid, inner)
            elif kind is _Comment:
                continue
            else:
                prev = kids[i - 1] if i else None
                nxt = kids[i + 1] if i < last else None
                if kid.strip() == "" and ((remove_inside and (not prev or not nxt)) or _outside(prev) or _outside(nxt)):
                    continue
                out = self.text(kid, remove_inside, node.name == "pre" or node.in_pre, prev, nxt, inner)
            if out:
                strings.append(out)
        if name != "pre" and not node.in_pre and any(string[0] == "\n" for string in strings[1:]):
            strings = _collapse_newlines(strings)  # (a no-op unless a string after the first starts a line)
        text = "".join(strings)
        if name in self.rules:
            convert = self.rules[name]
        else:
            convert = self.rules[name] = self.convert_fn(name)
        return convert(node, text, parent_tags) if convert is not None else text

    def text(self, el: str, block: bool, in_pre: bool, prev: Any, nxt: Any, parent_tags: frozenset[str]) -> str:
        """markdownify's process_text of ``el``, a string whose parent is a ``block`` element (or
        not), inside a <pre> (or not), between ``prev`` and ``nxt``."""
        text = str(el)
        spaced = "\t" in text or "\n" in text or "\r" in text or "  " in text
        if type(el) is str and spaced:  # a plain string: calmed first (tether.tools.web's _calm_whitespace)
            text = _calm(text, in_pre)
        if "pre" not in parent_tags and spaced:
            text = _NEWLINE_WHITESPACE.sub("\n", text)
            text = _WHITESPACE.sub(" ", text)
        if "_noformat" not in parent_tags and text:
            text = text.replace("*", r"\*").replace("_", r"\_")
        if _outside(prev) or (block and not prev):
            text = text.lstrip(" \t\r\n")
        if _outside(nxt) or (block and not nxt):
            text = text.rstrip()
        return text

    def convert_fn(self, name: str) -> Callable[[_Node, str, frozenset[str]], str] | None:
        name = name.lower()
        if name == "img":  # strip=["img"]
            return None
        found = _RULES.get(_CONVERT_NAME.sub("_", name))
        if found is not None:
            return found
        match = _HEADING.match(name)
        if match:
            n = int(match.group(1))
            return lambda el, text, parent_tags: _heading(n, text, parent_tags)
        return None


def _collapse_newlines(strings: list[str]) -> list[str]:
    updated = [""]  # so the first lookback works
    for string in strings:
        # markdownify's ^(\n*)((?:.*[^\n])?)(\n*)$, without the regex
        content = string.lstrip("\n")
        leading = string[: len(string) - len(content)]
        trailing = ""
        if content[-1:] == "\n":
            stripped = content.rstrip("\n")
            content, trailing = stripped, content[len(stripped) :]
        if updated[-1] and leading:
            previous = updated.pop()
            leading = "\n" * min(2, max(len(previous), len(leading)))
        updated.extend((leading, content, trailing))
    return updated


def _inline(markup: str) -> Callable[[_Node, str, frozenset[str]], str]:
    def convert(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
        if "_noformat" in parent_tags:
            return text
        prefix, suffix, text = _chomp(text)
        if not text:
            return ""
        return f"{prefix}{markup}{text}{markup}{suffix}"

    return convert


def _a(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if "_noformat" in parent_tags:
        return text
    prefix, suffix, text = _chomp(text)
    if not text:
        return ""
    href = el.get("href")
    title = el.get("title")
    if text.replace(r"\_", "_") == href and not title:
        return f"<{href}>"
    title_part = ' "{}"'.format(title.replace('"', r"\"")) if title else ""
    return f"{prefix}[{text}]({href}{title_part}){suffix}" if href else text


def _blockquote(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    text = (text or "").strip(" \t\r\n")
    if "_inline" in parent_tags:
        return " " + text + " "
    if not text:
        return "\n"
    text = _LINE_WITH_CONTENT.sub(lambda m: "> " + m.group(1) if m.group(1) else ">", text)
    return "\n" + text + "\n\n"


def _br(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if "_inline" in parent_tags:
        return text + " " if text else " "
    return "  \n" + text


def _code(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if "_noformat" in parent_tags:
        return text
    prefix, suffix, text = _chomp(text)
    if not text:
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    delimiter = "`" * (longest + 1)
    if longest > 0:
        text = " " + text + " "
    return f"{prefix}{delimiter}{text}{delimiter}{suffix}"


def _div(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if "_inline" in parent_tags:
        return " " + text.strip() + " "
    text = text.strip()
    return f"\n\n{text}\n\n" if text else ""


def _dd(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    text = (text or "").strip()
    if "_inline" in parent_tags:
        return " " + text + " "
    if not text:
        return "\n"
    text = _LINE_WITH_CONTENT.sub(lambda m: "    " + m.group(1) if m.group(1) else "", text)
    return ":" + text[1:] + "\n"


def _dt(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    text = _ALL_WHITESPACE.sub(" ", (text or "").strip())
    if "_inline" in parent_tags:
        return " " + text + " "
    if not text:
        return "\n"
    return f"\n\n{text}\n"


def _heading(n: int, text: str, parent_tags: frozenset[str]) -> str:
    if "_inline" in parent_tags:
        return text
    n = max(1, min(6, n))
    text = _ALL_WHITESPACE.sub(" ", text.strip())
    return "\n\n{} {}\n\n".format("#" * n, text)


def _hr(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    return "\n\n---\n\n"


def _video(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if "_inline" in parent_tags:
        return text
    src = el.get("src") or ""
    if not src:
        sources = [s for s in el.find_all(frozenset({"source"})) if s.get("src") is not None]
        if sources:
            src = sources[0].get("src") or ""
    poster = el.get("poster") or ""
    if src and poster:
        return f"[![{text}]({poster})]({src})"
    if src:
        return f"[{text}]({src})"
    if poster:
        return f"![{text}]({poster})"
    return text


def _list(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    before_paragraph = False
    following = None
    if el.parent is not None:
        kids = el.parent.kids
        following = next((kids[i] for i in range(el.index + 1, len(kids)) if _content(kids[i])), None)
    if following is not None and getattr(following, "name", None) not in ("ul", "ol"):
        before_paragraph = True
    if "li" in parent_tags:
        return "\n" + text.rstrip()
    return "\n\n" + text + ("\n" if before_paragraph else "")


def _li(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    text = (text or "").strip()
    if not text:
        return "\n"
    parent = el.parent
    if parent is not None and parent.name == "ol":
        start_attr = parent.get("start")
        start = int(start_attr) if start_attr and str(start_attr).isnumeric() else 1
        bullet = f"{start + el.items_before()}."
    else:
        depth = -1
        node: _Node | None = el
        while node is not None:
            if node.name == "ul":
                depth += 1
            node = node.parent
        bullet = "*+-"[depth % 3]
    bullet += " "
    width = len(bullet)
    indent = " " * width
    text = _LINE_WITH_CONTENT.sub(lambda m: indent + m.group(1) if m.group(1) else "", text)
    return bullet + text[width:] + "\n"


def _p(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if "_inline" in parent_tags:
        return " " + text.strip(" \t\r\n") + " "
    text = text.strip(" \t\r\n")
    return f"\n\n{text}\n\n" if text else ""


def _pre(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    if not text:
        return ""
    text = _PRE_RSTRIP.sub("", _PRE_LSTRIP.sub("", text))
    return f"\n\n```\n{text}\n```\n\n"


def _colspan(cell: _Node) -> int:
    value = cell.get("colspan")
    if value is not None and value.isdigit():
        return max(1, min(1000, int(value)))
    return 1


def _cell(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    return " " + text.strip().replace("\n", " ") + " |" * _colspan(el)


def _tr(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    cells = el.find_all(frozenset({"td", "th"}))
    first_row = el.previous_tag() is None
    parent = el.parent
    assert parent is not None
    head_row = all(cell.name == "th" for cell in cells) or (
        parent.name == "thead" and len(parent.find_all(frozenset({"tr"}))) == 1
    )
    grand = parent.parent
    head_row_missing = (first_row and parent.name != "tbody") or (
        first_row and parent.name == "tbody" and grand is not None and len(grand.find_all(frozenset({"thead"}))) < 1
    )
    full_colspan = sum(_colspan(cell) for cell in cells)
    overline = underline = ""
    if head_row and first_row:
        underline = "| " + " | ".join(["---"] * full_colspan) + " |\n"
    elif head_row_missing or (
        first_row and (parent.name == "table" or (parent.name == "tbody" and parent.previous_tag() is None))
    ):
        overline = "| " + " | ".join([""] * full_colspan) + " |\n"
        overline += "| " + " | ".join(["---"] * full_colspan) + " |\n"
    return overline + "|" + text + "\n" + underline


def _document(el: _Node, text: str, parent_tags: frozenset[str]) -> str:
    return text.strip("\n")


_STRONG = _inline("**")
_EM = _inline("*")
_DEL = _inline("~~")
_BARE = _inline("")
_RULES: dict[str, Callable[[_Node, str, frozenset[str]], str]] = {
    "a": _a,
    "b": _STRONG,
    "strong": _STRONG,
    "em": _EM,
    "i": _EM,
    "del": _DEL,
    "s": _DEL,
    "sub": _BARE,
    "sup": _BARE,
    "blockquote": _blockquote,
    "br": _br,
    "code": _code,
    "kbd": _code,
    "samp": _code,
    "div": _div,
    "article": _div,
    "section": _div,
    "dl": _div,
    "dd": _dd,
    "dt": _dt,
    "hr": _hr,
    "video": _video,
    "list": _list,
    "ul": _list,
    "ol": _list,
    "li": _li,
    "p": _p,
    "pre": _pre,
    "q": lambda el, text, parent_tags: '"' + text + '"',
    "script": lambda el, text, parent_tags: "",
    "style": lambda el, text, parent_tags: "",
    "table": lambda el, text, parent_tags: "\n\n" + text.strip() + "\n\n",
    "caption": lambda el, text, parent_tags: text.strip() + "\n\n",
    "figcaption": lambda el, text, parent_tags: "\n\n" + text.strip() + "\n\n",
    "td": _cell,
    "th": _cell,
    "tr": _tr,
    "_document_": _document,
}
