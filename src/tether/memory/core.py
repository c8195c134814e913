"""Cross-session memory: the user profile and fact notes, their checks, and their prompt block."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tether._secrets import credential_kind, credential_pattern
from tether.errors import ConfigError, UserError
from tether.harness.extension import Extension
from tether.memory.store import STORES, Change, MemoryRefused, MemoryStore, StoreUsage, TextStore, chars, clean_entry

if TYPE_CHECKING:
    from tether.memory.scan import Finding, Scanner
    from tether.postgres.db import Database

__all__ = ["DEFAULT_NOTES_LIMIT", "DEFAULT_PROFILE_LIMIT", "Memory", "MemoryScope"]

DEFAULT_PROFILE_LIMIT = 1_400
DEFAULT_NOTES_LIMIT = 2_200
MemoryScope = Literal["user", "project"]

_SNAPSHOT_NOTE = (
    "Memory is a snapshot: the change reaches the system prompt from the next session. In this "
    "session, act on it yourself."
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


_SECRET_ADVICE = (
    "save where the secret is kept (the name of its environment variable, its vault path), never the secret"
)


def _secret(text: str) -> str | None:
    """What credential ``text`` holds, quoted by its first characters only, or None: saved, one
    would reach every future system prompt, the trace's memory_write events and the plain file
    (the shapes their issuers give them: :data:`tether._secrets.CREDENTIAL_SHAPES`)."""
    found = credential_pattern().search(text)
    if found is None:
        return None
    what = credential_kind(found)
    return f"it holds what looks like {what} (\u201c{found.group()[:7]}\u2026\u201d)"


def _control(text: str) -> str | None:
    """The first C0 (but tab and newline), DEL or C1 character (U+009B is a terminal's CSI): none
    has a visible form."""
    return next((c for c in text if (c < " " and c not in "\t\n") or "\x7f" <= c <= "\x9f"), None)


def _short(text: str, n: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "\u2026"


def _advice(advice: str) -> str:
    """A scan's advice as the closing sentence of a refusal (a plain one when it gives none)."""
    advice = advice.strip().rstrip(".")
    return f"{advice[:1].upper()}{advice[1:]}." if advice else "Save the fact itself, in plain words."


def _digest(entry: str) -> str:
    return hashlib.sha256(entry.encode("utf-8", "surrogatepass")).hexdigest()


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def project_dir(root: Path, project: Path) -> Path:
    """``<root>/projects/<folder name>-<hash of its real path>``: readable, and unique."""
    real = str(project.resolve())
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", project.resolve().name).strip("-.")[:40] or "root"
    return root / "projects" / f"{slug}-{hashlib.sha256(real.encode()).hexdigest()[:10]}"


def _check_options(scope: object, user: object, profile_limit: object, notes_limit: object) -> None:
    if user is not None and (not isinstance(user, str) or not _NAME.fullmatch(user)):
        raise UserError(f"not a memory user name: {user!r} (letters, digits, '.', '_', '-')")
    if scope not in ("user", "project"):
        raise ConfigError(f"memory scope must be 'user' or 'project', not {scope!r}")
    for label, limit in (("profile_limit", profile_limit), ("notes_limit", notes_limit)):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:  # True is not 1 character
            raise ConfigError(f"memory {label} must be a positive number of characters, not {limit!r}")


class Memory(Extension):
    """The two stores, scanned on every write, shown to the model as one block of the system
    prompt, and changed by the model through the ``memory`` tool.

    ``Agent(extensions=[Memory.open()])`` gives an agent both."""

    name = "memory"

    def __init__(self, profile: MemoryStore, notes: MemoryStore, *, scanners: Sequence[Scanner] | None = None) -> None:
        self.stores: dict[str, MemoryStore] = {"profile": profile, "notes": notes}
        self._scanners: tuple[Scanner, ...] | None = tuple(scanners) if scanners is not None else None
        self._passed: set[str] = set()  # entries already scanned clean (each session start rescans the files)

    @classmethod
    def open(
        cls,
        home: Path | str | None = None,
        *,
        scope: MemoryScope = "user",
        project: Path | str | None = None,
        user: str | None = None,
        profile_limit: int = DEFAULT_PROFILE_LIMIT,
        notes_limit: int = DEFAULT_NOTES_LIMIT,
        scanners: Sequence[Scanner] | None = None,
    ) -> Memory:
        """Memory under ``home/memory`` (``$TETHER_HOME`` by default). The profile is the user's
        everywhere; with ``scope="project"`` the notes belong to ``project`` (default: the current
        directory). ``user`` keeps one person's memory apart from another's on a shared home."""
        if home is None:
            from tether.config import tether_home

            home = tether_home()
        _check_options(scope, user, profile_limit, notes_limit)
        root = Path(home) / "memory"
        if user is not None:
            root = root / "users" / user
        notes_dir = project_dir(root, Path(project or Path.cwd())) if scope == "project" else root
        return cls(
            TextStore("profile", root / "profile.md", profile_limit),
            TextStore("notes", notes_dir / "notes.md", notes_limit),
            scanners=scanners,
        )

    @classmethod
    def open_postgres(
        cls,
        db: Database | str,
        *,
        scope: MemoryScope = "user",
        project: Path | str | None = None,
        user: str | None = None,
        profile_limit: int = DEFAULT_PROFILE_LIMIT,
        notes_limit: int = DEFAULT_NOTES_LIMIT,
        scanners: Sequence[Scanner] | None = None,
    ) -> Memory:
        """Memory in Postgres (``db``, or the process's pool for a ``postgresql://`` URL), for
        machines that share it; the options mean what they mean for :meth:`open`. Each store is
        one row keyed by (scope, store): the scope is ``user`` (or ``users/<user>``) for the
        profile and for notes, ``<that>/projects/<folder>-<hash>`` for project notes."""
        _check_options(scope, user, profile_limit, notes_limit)
        from tether.postgres.db import database
        from tether.postgres.memory import PgTextStore

        pool = database(db) if isinstance(db, str) else db
        base = "user" if user is None else f"users/{user}"
        notes = project_dir(Path(base), Path(project or Path.cwd())).as_posix() if scope == "project" else base
        return cls(
            PgTextStore(pool, "profile", base, profile_limit),
            PgTextStore(pool, "notes", notes, notes_limit),
            scanners=scanners,
        )

    @property
    def scanners(self) -> tuple[Scanner, ...]:
        """The scanners every write (and every entry shown) passes; the default one is built on
        first use, so memory that is never written or shown never loads it."""
        if self._scanners is None:
            from tether.memory.scan import default_scanner

            self._scanners = (default_scanner(),)
        return self._scanners

    # -- reading -----------------------------------------------------------------------------

    def store(self, name: str) -> MemoryStore:
        if name not in self.stores:
            raise UserError(f"no memory store named {name!r}: use 'profile' or 'notes'")
        return self.stores[name]

    def entries(self, store: str) -> list[str]:
        return self.store(store).entries()

    def usage(self, store: str) -> StoreUsage:
        return self.store(store).usage()

    def check(self, text: str) -> Finding | None:
        """The first scanner's finding against ``text``, or None when every scanner lets it pass."""
        for scanner in self.scanners:
            finding = scanner.scan(text)
            if finding is not None:
                return finding
        return None

    def withheld(self, entry: str) -> Finding | None:
        """Why a stored entry is kept from the prompt (and from what the memory tool shows), or
        None: what a write refuses, found in an entry written by hand: a credential (which would
        reach the provider, the session and the trace), a control character, or the scan's finding."""
        secret = _secret(entry)
        control = _control(entry)
        if secret is None and control is None:
            return self.check(entry)
        from tether.memory.scan import Finding

        if secret is not None:
            return Finding("secret", secret, _SECRET_ADVICE)
        return Finding("control", f"it holds a control character ({control!r})", "write it again without it")

    # -- writing (each under the store's lock) -----------------------------------------------

    def add(self, store: str, text: str) -> Change:
        s = self.store(store)
        entry = self._checked(text, s, adding=True)
        with s.edit() as entries:
            if any(_same(e, entry) for e in entries):
                return Change(
                    store, "add", entry, False, s.usage(entries), f"Already in {store}, word for word: nothing changed."
                )
            before = self._shown_next_to(entries, len(entries) - 1, -1)
            if before is not None and _continues(before, entry):
                self._check_joined(before, entry)
            self._fits(s, entries, [*entries, entry])
            entries.append(entry)
            usage = s.usage(entries)
        return Change(store, "add", entry, True, usage, f"Saved to {store}. {self._usage_line(usage)}")

    def replace(self, store: str, match: str, text: str, *, target: str | None = None) -> Change:
        s = self.store(store)
        entry = self._checked(text, s, adding=False)
        with s.edit() as entries:
            i = self._find(s, entries, match, target)
            head = [e for e in entries[:i] if not _same(e, entry)]  # no duplicates
            after = [*head, entry, *(e for e in entries[i + 1 :] if not _same(e, entry))]
            if after == entries:
                return Change(
                    store,
                    "replace",
                    entry,
                    False,
                    s.usage(entries),
                    f"That entry in {store} already reads so: nothing changed.",
                )
            self._fits(s, entries, after)
            k = len(head)  # the new entry now sits between two others: each pair reads as one text
            before = self._shown_next_to(after, k - 1, -1)
            if before is not None and _continues(before, entry):
                self._check_joined(before, entry)
            following = self._shown_next_to(after, k + 1, 1)
            if following is not None and _continues(entry, following):
                self._check_joined(entry, following, new_first=True)
            entries[:] = after
            usage = s.usage(entries)
        return Change(store, "replace", entry, True, usage, f"Replaced in {store}. {self._usage_line(usage)}")

    def remove(self, store: str, match: str, *, target: str | None = None) -> Change:
        s = self.store(store)
        with s.edit() as entries:
            i = self._find(s, entries, match, target)
            gone = entries.pop(i)
            usage = s.usage(entries)
        return Change(
            store,
            "remove",
            gone,
            True,
            usage,
            f"Removed from {store}: {self._quoted(gone, 80)}. {self._usage_line(usage)}",
        )

    def clear(self, store: str) -> Change:
        """Empty ``store``, and remove the copies of its file kept when it was found damaged (not
        UTF-8): a clear forgets what was remembered, wherever it was kept."""
        s = self.store(store)
        with s.edit() as entries:
            count = len(entries)
            entries.clear()
        # Copies of the file kept when it was found damaged hold the old entries too: forgotten with them.
        copies = s.drop_damaged_copies() if isinstance(s, TextStore) else []
        noun = "entry" if count == 1 else "entries"
        message = f"Cleared {store} ({count} {noun})."
        if copies:
            kind = "copy" if len(copies) == 1 else "copies"
            message += f" Removed {len(copies)} damaged {kind} of it: {', '.join(str(c) for c in copies)}."
        return Change(store, "clear", "", count > 0 or bool(copies), s.usage([]), message)

    def _checked(self, text: str, s: MemoryStore, *, adding: bool) -> str:
        if not isinstance(text, str):
            raise MemoryRefused("Not saved: the entry must be text.", "empty")
        # A byte that is not UTF-8 reaches here as a lone surrogate (a shell argument decoded with
        # surrogateescape, or a "\udcff" escape in a tool call's JSON): no file or prompt can hold it.
        at = next((i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff"), None)
        if at is not None:
            raise MemoryRefused(
                f"Not saved: the entry is not valid UTF-8 text (a byte that is not a character at "
                f"position {at + 1}). Save it as UTF-8 text.",
                "encoding",
            )
        # The scan reads the entry as it would be stored and shown: a megabyte of blank lines or
        # spaces around a short note is trimmed first, never scanned (it held the run for seconds).
        entry = clean_entry(text)
        self._cannot_fit(s, entry, adding=adding)
        secret = _secret(entry)
        if secret is not None:
            raise MemoryRefused(
                f"Not saved: {secret}. Memory goes into the system prompt of every future session and into "
                f"traces, as plain text. {_advice(_SECRET_ADVICE)}",
                "secret",
            )
        finding = self.check(entry)
        if finding is not None:
            raise MemoryRefused(
                f"Not saved: {finding.reason}. Memory goes into the system prompt of every future "
                "session, so text that reads as instructions to the assistant, hides characters, or "
                f"reaches for secrets is refused whole. {_advice(finding.advice)}",
                f"scan:{finding.rule}",
            )
        if not entry:
            raise MemoryRefused("Not saved: the entry is empty.", "empty")
        control = _control(entry)
        if control is not None:  # no place in a prompt, and the Postgres store could not keep a NUL
            raise MemoryRefused(
                f"Not saved: the entry holds a control character ({control!r}). Save it without it.", "control"
            )
        return entry

    def _check_joined(self, first: str, second: str, *, new_first: bool = False) -> None:
        """An injection split over two entries (\u201cIgnore all previous\u201d, then
        \u201cinstructions and ...\u201d) reads as one in the prompt, where entries are adjacent lines. The
        new entry is ``second`` (or ``first`` with ``new_first``). A neighbour that the scan refuses
        alone (saved under an older scan) is withheld from the prompt already: it blames nothing
        next to it."""
        other, where = (second, "after") if new_first else (first, "before")
        finding = self.check(f"{first}\n{second}")
        if finding is not None and self.check(other) is None:
            raise MemoryRefused(
                f"Not saved: this entry is harmless alone, but shown {'before' if new_first else 'after'} the "
                f"entry {where} it (\u201c{_short(other, 60)}\u201d) the two read as one text, and "
                f"{finding.message}. Save the fact in its own words, or change the entry {where} it first.",
                f"scan:joined:{finding.rule}",
            )

    def _shown_next_to(self, entries: list[str], start: int, step: int) -> str | None:
        """The nearest entry from ``start`` on (going by ``step``) that the prompt shows: one the scan
        refuses alone is withheld, and the new entry is shown next to the one beyond it."""
        j = start
        while 0 <= j < len(entries):
            if self._clean(entries[j]):
                return entries[j]
            j += step
        return None

    def _cannot_fit(self, s: MemoryStore, entry: str, *, adding: bool) -> None:
        """Refuse, before the scan reads it, an entry that cannot fit whatever the scan says: longer
        than the limit and (for a replace) than all the store holds now. A megabyte from a hostile
        model would hold the scan, and the run, for many seconds."""
        if len(entry) <= s.limit:
            return
        now = s.entries()
        if adding:
            self._fits(s, now, [*now, entry])
        elif len(entry) > chars(now):
            self._fits(s, now, [entry])

    @staticmethod
    def _fits(s: MemoryStore, before: list[str], after: list[str]) -> None:
        now, then = s.usage(before), s.usage(after)
        if then.chars > s.limit and then.chars > now.chars:  # a change that shrinks a full store is fine
            raise MemoryRefused(
                f"Not saved: {s.name} would hold {then.chars:,} of its {s.limit:,} characters; it is at "
                f"{now.chars:,} ({now.percent} %). Consolidate first: merge related entries with replace "
                "or remove those that no longer matter, then try again with something shorter.",
                "limit",
            )

    def target(self, store: str, match: str) -> str:
        """The entry ``match`` names now, as the ``target`` a later :meth:`remove` or :meth:`replace`
        may be pinned to (a digest: no text of the entry); MemoryRefused as they would refuse."""
        s = self.store(store)
        entries = s.entries()
        return _digest(entries[self._find(s, entries, match)])

    def _find(self, s: MemoryStore, entries: list[str], match: str, target: str | None = None) -> int:
        needle = (match or "").strip()
        if not needle:
            raise MemoryRefused("Say which entry: match must be a part of its text.", "not_found")
        if target is not None:  # the entry chosen earlier (see target()), and no other
            pinned = [i for i, e in enumerate(entries) if _digest(e) == target]
            if pinned:
                return pinned[0]
            raise MemoryRefused(
                f"The {s.name} entry that \u201c{_short(needle)}\u201d named is no longer there (removed or changed "
                "already): nothing changed.",
                "not_found",
            )
        exact = [i for i, e in enumerate(entries) if _same(e, needle)]
        if exact:
            return exact[0]
        hits = [i for i, e in enumerate(entries) if needle in e]
        if not hits:
            hits = [i for i, e in enumerate(entries) if needle.casefold() in e.casefold()]
        if not hits:
            joined = self._joined(s, entries)
            listing = "; ".join(self._quoted(e, 60, i in joined) for i, e in enumerate(entries[:12])) or "(it is empty)"
            raise MemoryRefused(
                f"No entry in {s.name} contains \u201c{_short(needle)}\u201d. Its entries: {listing}", "not_found"
            )
        distinct: list[int] = []
        for i in hits:
            if not any(_same(entries[i], entries[j]) for j in distinct):
                distinct.append(i)
        if len(distinct) > 1:
            joined = self._joined(s, entries)
            listing = "\n".join(
                f"  {n}. {self._quoted(entries[i], 80, i in joined)}" for n, i in enumerate(distinct, 1)
            )
            raise MemoryRefused(
                f"Be more specific: \u201c{_short(needle)}\u201d is in {len(distinct)} different "
                f"{s.name} entries:\n{listing}\nGive a longer part of the one you mean.",
                "ambiguous",
            )
        return distinct[0]

    def _quoted(self, entry: str, n: int, joined: bool = False) -> str:
        """An entry as a message quotes it, unless the scan withholds it from the prompt (alone, or
        ``joined``: with the entry next to it, as one injection): what the model is told must not
        carry what the prompt keeps from it (a listing quotes entries side by side)."""
        if self._clean(entry) and not joined:
            return f"\u201c{_short(entry, n)}\u201d"
        return "(an entry withheld from the assistant: it failed the security scan)"

    def _joined(self, s: MemoryStore, entries: list[str]) -> set[int]:
        """Which of ``entries`` the prompt withholds because it reads as one injection with the
        entry shown next to it."""
        return {i for i, why in enumerate(self._left_out(s, entries)) if why is not None and why.startswith("joined")}

    def _clean(self, entry: str) -> bool:
        if entry not in self._passed:
            if self.withheld(entry) is not None:
                return False
            self._passed.add(entry)
        return True

    def _left_out(self, s: MemoryStore, entries: list[str]) -> list[str | None]:
        """Why the prompt leaves out each of a store's ``entries`` (None: it shows it): ``limit``
        for one that does not fit (a file edited by hand past its limit shows what fits, in order;
        what does not fit is not scanned either: a megabyte pasted by hand, or thousands of lines,
        would cost seconds at every session start), ``scan`` for one that :meth:`withheld` refuses
        alone, and ``joined: <what the scan found>`` for each of two shown entries that read as one
        text (an injection split over two entries written by hand)."""
        why: list[str | None] = []
        kept: list[int] = []
        used = 0
        for i, e in enumerate(entries):
            grown = used + len(e) + (1 if kept else 0)  # as chars() counts them
            if grown > s.limit:
                why.append("limit")
            elif self._clean(e):
                kept.append(i)
                used = grown
                why.append(None)
            else:
                why.append("scan")
        # Shown entries are adjacent lines, also where one between them was left out: read each
        # pair together.
        k = 0
        while k + 1 < len(kept):
            first, second = entries[kept[k]], entries[kept[k + 1]]
            pair = f"{first}\n{second}"
            finding = None
            if _continues(first, second) and pair not in self._passed:
                finding = self.check(pair)
            if finding is not None:
                why[kept[k]] = why[kept[k + 1]] = f"joined: {finding.message}"
                del kept[k : k + 2]
                k = max(k - 1, 0)  # the entries now adjacent are read together too
                continue
            self._passed.add(pair)
            k += 1
        return why

    def _shown(self, s: MemoryStore, entries: list[str]) -> tuple[list[str], int, int]:
        """What the prompt shows of a store's ``entries``, how many of them the scan withholds, and
        how many do not fit the limit (see :meth:`_left_out`)."""
        why = self._left_out(s, entries)
        hidden = why.count("limit")
        kept = [e for e, w in zip(entries, why, strict=True) if w is None]
        return kept, len(entries) - len(kept) - hidden, hidden

    @staticmethod
    def _usage_line(usage: StoreUsage) -> str:
        return f"{usage.store} is now at {usage.chars:,}/{usage.limit:,} chars ({usage.percent} %). {_SNAPSHOT_NOTE}"

    # -- the extension seam ------------------------------------------------------------------

    def tools(self) -> Sequence[Any]:
        from tether.memory.tool import MemoryTool

        return (MemoryTool(self),)

    def prompt_block(self) -> str:
        """The fixed block for the system prompt, read now (a session's snapshot)."""
        lines = [
            "# Memory",
            "What you remember from earlier sessions, saved with the memory tool or by the user. It is a "
            "snapshot taken when this session began: changes you make now are saved at once and appear here "
            "from the next session.",
        ]
        for name in STORES:
            s = self.stores[name]
            entries = s.entries()
            kept, withheld, hidden = self._shown(s, entries)
            lines.append(s.usage(entries).label())
            lines.extend(f"- {e}".replace("\n", "\n  ") for e in kept)
            if not entries:
                lines.append("(empty)")
            if withheld:
                lines.append(
                    f"({withheld} entr{'y' if withheld == 1 else 'ies'} withheld: failed the security "
                    "scan; the user can see them with `tether memory show`)"
                )
            if hidden:
                what = "entry does not fit the limit and is" if hidden == 1 else "entries do not fit the limit and are"
                lines.append(f"({hidden} more {what} not shown; consolidate)")
        return "\n".join(lines)


_FINAL = frozenset('.!?;:\u2026\u3002\uff01\uff1f\uff1b\u061f\u0964)]"\u201d\u00bb')


def _continues(before: str, entry: str) -> bool:
    """Whether ``entry`` can read as the rest of ``before``: the earlier entry ends without a
    sentence's final mark, and the new one does not open with a capital."""
    end, start = before.rstrip()[-1:], entry.lstrip()[:1]
    return bool(end) and end not in _FINAL and not start.isupper()
