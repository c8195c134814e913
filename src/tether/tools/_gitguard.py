"""Git repositories in the sandbox's writable folders: read-only during a command, checked after it.

git runs what a repository's folder names (a hook in ``hooks/``; ``core.fsmonitor``,
``core.hooksPath``, an alias, a filter or a diff driver in ``config``) with the rights of whoever
runs git there, outside any sandbox. So, around each ``workspace-write`` command:

* before it, the writable folders are walked, breadth first, for every repository's folder: a
  ``.git`` at any depth, what a ``.git`` file (``gitdir:``) or link leads to, a folder that is one
  by git's own test (a ``HEAD`` with ``objects`` and ``refs``, or with a ``commondir``) and the
  folder a ``commondir`` names. The sandbox binds each read-only unless it is listed in
  ``writable`` or holds :data:`MADE`, the mark left in a repository a command made once it was
  checked (no command can mark one it did not make: those are read-only to it). The walk stops
  after :data:`MAX_FOLDERS` folders of each writable path and does not enter the folders the file
  tools pass over (``node_modules``, ``.venv``...); what it costs, twice per command, is measured
  in docs/tools.md.
* after it, the same walk finds the repositories the command could write: those it made (``git
  init``, ``git clone``, a ``.git`` or a bare repository built file by file, in one command or
  over several: the one that completes it is caught), those a ``.git`` file or ``commondir`` it
  wrote leads to, and the listed and marked ones. Every hook it added there is moved into
  ``refused-by-tether/`` in that folder, and every setting it added to ``config`` that is not on a
  short list of harmless ones (:data:`SAFE_KEYS`) is taken out, the whole file kept there first.
  git reads nothing from that folder; the result says what was moved and why.

A repository the walk had not found before the command is the command's when any of its files
(``HEAD``, ``objects``, ``refs``, ``config``, ``hooks``...), the ``.git`` file or ``commondir``
that leads to it, or a folder above either changed during the command, by ``ctime``, which a
process cannot set back (it is the kernel's clock when an inode changes; ``touch -d`` sets only
``mtime``). In a listed or
marked repository the hooks' and configs' signatures and the configs' text are read before the
command, so what the person had there stays as it is.

What the configs (the repositories', what they include, the person's global and system ones) point
git at in the working tree, outside the repositories' folders, is treated the same way
(:class:`TreePath`): a ``core.hooksPath`` folder, an included settings file, a script a setting runs
named by path. Each that exists is bound read-only; after the command, whatever stands at one of
those paths and did not before is moved aside.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import shlex
import stat
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tether.tools._confine import IGNORED
from tether.tools._jail import git_dir_elsewhere, inside, real

__all__ = [
    "ASIDE",
    "MADE",
    "MAX_FOLDERS",
    "SAFE_KEYS",
    "Survey",
    "TreePath",
    "check",
    "read_only_note",
    "survey",
    "tree_paths",
]

MAX_FOLDERS = 2000
ASIDE = "refused-by-tether"
MADE = "made-in-tether-sandbox"
_MADE_TEXT = (
    "A command in tether's sandbox made this git repository, so later sandboxed commands may write\n"
    "it (commit, branch...); the hooks and the settings that run programs they add are taken out\n"
    "after each one. Delete this file to make it read-only for them, as every other repository is.\n"
)
# Settings git only stores or reads as data: what git init, git clone, git remote add, git branch -u,
# git submodule add and git config user.* write. Anything else (an alias, core.fsmonitor,
# core.hooksPath, core.pager, core.sshCommand, a filter, diff or merge driver, include.path,
# submodule.*.update, remote.*.uploadpack...) is taken out when a command adds it.
SAFE_KEYS = (
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.worktree",  # only to a folder inside the writable paths (git submodule add writes it)
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "init.defaultbranch",
    "user.name",
    "user.email",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.tagopt",
    "remote.*.prune",
    "remote.*.mirror",
    "branch.*.remote",
    "branch.*.merge",
    "branch.*.rebase",
    "branch.*.pushremote",
    "branch.*.description",
    "submodule.*.url",
    "submodule.*.active",
    "submodule.*.branch",
)
_SKIP = IGNORED  # .git included: a repository's folder is found, not walked
_REPO_MARKS = frozenset({"HEAD", "objects", "refs", "commondir"})
_CONFIGS = ("config", "config.worktree")
_MARKERS = ("HEAD", "objects", "refs", "commondir", "hooks", *_CONFIGS)
_MAX_CONFIG = 1 << 20
_TODO = "rebase-merge/git-rebase-todo"
_EXEC = re.compile(rb"^[ \t]*(?:x|exec)(?![A-Za-z0-9_])", re.MULTILINE)  # x or exec as a word
_NOT_REPOS = ("objects", "refs", "logs", "hooks")
LEFT = "STILL THERE"  # in a phrase of check()'s when something git would run could not be taken out
_LEFT = f"{LEFT}: the user must remove it before running git there"
_MARGIN_NS = 2_000_000_000  # file systems keep ctime in steps (the kernel's tick; FAT: 2 s)
_HEADER = re.compile(r'[ \t]*\[[ \t]*([A-Za-z0-9.-]+)(?:[ \t]+"((?:[^"\\\n]|\\.)*)")?[ \t]*\]')
_ENTRY = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:=(.*))?")
_BLANK = re.compile(r"[ \t]*(?:[#;].*)?")
_PLAIN_PATH = re.compile(r'"?([^"\\;#]*)"?')

Identity = tuple[int, int]
Signature = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class TreePath:
    """A path in the writable folders, outside every repository's folder, that a config points git
    at (``core.hooksPath``, ``include.path``, a script a setting runs)."""

    path: Path  # as git opens it, links not resolved
    repo: Path  # the repository folder whose git reads it: what is taken out is kept there
    why: str  # "core.hooksPath in .git/config: git runs the hooks in it"
    program: bool  # named by a setting that runs it: a folder appearing there is harmless
    signature: Signature | None  # before the command
    bound: Path | None  # its real path, bound read-only, when it exists and is in the writable folders


@dataclass(frozen=True)
class Survey:
    """The repositories found in the writable folders before a command."""

    roots: tuple[Path, ...]
    listed: frozenset[Path]
    repos: dict[Identity, Path]
    bound: tuple[Path, ...]  # bound read-only for the command
    made: tuple[Path, ...]  # left writable: made by an earlier sandboxed command (MADE in them)
    # In the repositories left writable (listed): each hook's and config's signature, each config's bytes.
    seen: dict[Path, Signature]
    configs: dict[Path, bytes]
    complete: bool  # False: the walk stopped at MAX_FOLDERS
    # What the repositories' configs point git at in the working tree: read-only, checked after.
    tree: tuple[TreePath, ...] = ()

    @property
    def tree_bound(self) -> tuple[Path, ...]:
        """The real paths of ``tree`` that exist: bound read-only for the command."""
        return tuple(dict.fromkeys(t.bound for t in self.tree if t.bound is not None))


def _stat(path: Path | str, follow: bool = False) -> os.stat_result | None:
    try:
        return os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None


def _signature(path: Path) -> Signature | None:
    st = _stat(path)
    return None if st is None else (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _surface(folder: Path) -> Iterator[Path]:
    """What git runs or reads settings from in a repository's folder: hooks, the hooks folder, configs,
    and a paused rebase's steps (``git rebase --continue`` runs their ``exec`` lines)."""
    yield folder / "hooks"
    yield from (folder / "hooks" / n for n in _names(folder / "hooks") if not n.endswith(".sample"))
    yield from (folder / n for n in _CONFIGS)
    yield folder / _TODO


def _common(folder: Path) -> Path | None:
    """The folder a ``commondir`` file names: git takes config and hooks from there."""
    st = _stat(folder / "commondir", follow=True)
    if st is None or not stat.S_ISREG(st.st_mode):  # a named pipe would hold the walk forever
        return None
    try:
        with open(folder / "commondir", "rb") as f:
            line = f.read(4096).split(b"\n", 1)[0].decode("utf-8", "surrogateescape").strip()
    except (OSError, ValueError):
        return None
    target = real(folder / line) if line else None
    return target if target is not None and target.is_dir() else None


class _Found:
    """Repository folders by identity, each with the file that led to it (a .git file or link, a
    commondir) when the walk reached it that way."""

    def __init__(self) -> None:
        self.repos: dict[Identity, Path] = {}
        self.via: dict[Identity, list[Path]] = {}

    def add(self, folder: Path, *via: Path) -> None:
        st = _stat(folder, follow=True)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return
        key = (st.st_dev, st.st_ino)
        if via:
            self.via.setdefault(key, []).extend(via)
        if key in self.repos:
            return
        self.repos[key] = real(folder)
        common = _common(folder)
        if common is not None:
            self.add(common, folder / "commondir")


def _walk(roots: Iterable[Path], since: int | None = None) -> tuple[_Found, bool]:
    """Every repository folder in ``roots``; False when a root's walk stopped at MAX_FOLDERS."""
    found = _Found()
    roots = tuple(roots)
    linked = {str(r) for r in roots}  # a link to a root (ln -s . loop) leads nowhere new
    complete = [_walk_one(root, found, since, roots, linked) for root in roots]  # each its own limit: a big cache
    return found, all(complete)  # listed does not crowd out the workspace


def _walk_one(root: Path, found: _Found, since: int | None, roots: tuple[Path, ...], linked: set[str]) -> bool:
    """Breadth first (the shallow repositories, which editors find by themselves, come first), at
    most MAX_FOLDERS folders; with ``since`` (after a command), the folders changed since then are
    walked past that and not counted: a command that makes thousands of folders to hide a repository
    behind them is walked to its end, at a cost in proportion to what it did.
    A link to a folder inside ``roots`` is walked once (``linked``) as the folder it leads to, and a
    repository found that way is reached through it (``proj -> node_modules/a``, where the walk does
    not go, is where the person would run git).
    Plain strings and one pass over each listing: this runs twice around every command."""
    queue: deque[tuple[str, tuple[Path, ...]]] = deque([(str(root), ())])
    counted = 0
    complete = True
    while queue:
        folder, via = queue.popleft()
        if not _changed_since(folder, since):
            counted += 1
            if counted > MAX_FOLDERS:
                if since is None:
                    return False
                complete = False
                continue
        links: list[str] = []
        below = _look(folder, found, via, links)
        if below is not None:
            queue.extend((b, via) for b in sorted(below))
        for link in sorted(links):
            target = os.path.realpath(link)
            if target not in linked and _within(Path(target), roots):
                linked.add(target)
                queue.append((target, (*via, Path(link))))
    return complete


def _look(folder: str, found: _Found, via: tuple[Path, ...], links: list[str]) -> list[str] | None:
    """Add the repositories ``folder`` is or holds (a ``.git``) to ``found`` (reached through the
    links ``via``); the folders to walk below it (None when it is a repository's own: its objects and
    refs hold none git looks for), and in ``links`` the links to folders in it."""
    below: list[str] = []
    # git's is_git_directory: HEAD with objects and refs, or a commondir. git asks only that objects and
    # refs can be searched (access X_OK), which an executable file or a link to a folder made later
    # passes, so any entry of those names counts.
    marks: set[str] = set()
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                name = entry.name
                if name in _REPO_MARKS:
                    marks.add(name)
                elif name == ".git":
                    dot_git = Path(entry.path)
                    target = dot_git if entry.is_dir(follow_symlinks=False) else git_dir_elsewhere(dot_git)
                    if target is not None:
                        found.add(target, *via, *(() if target == dot_git else (dot_git,)))
                if name not in _SKIP and entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
                elif name not in _SKIP and entry.is_symlink() and entry.is_dir():
                    links.append(entry.path)
    except OSError:
        return []
    if "HEAD" in marks and ({"objects", "refs"} <= marks or "commondir" in marks):
        found.add(Path(folder), *via)
        return None
    return below


def _changed_since(path: str, since: int | None) -> bool:
    st = None if since is None else _stat(path)
    return st is not None and since is not None and st.st_ctime_ns >= since


def _within(path: Path, roots: Iterable[Path]) -> bool:
    return any(inside(path, r) for r in roots)


def survey(roots: Iterable[Path], listed: Iterable[Path]) -> Survey:
    """Walk ``roots`` (real paths) before a command: what to bind read-only, what to compare after."""
    roots = tuple(roots)
    listed = frozenset(listed)
    found, complete = _walk(roots)
    bound: list[Path] = []
    made: list[Path] = []
    seen: dict[Path, Signature] = {}
    configs: dict[Path, bytes] = {}
    for folder in sorted(found.repos.values()):
        if not _within(folder, roots):
            continue  # read-only already
        if _is_made(folder) and folder not in listed:
            made.append(folder)
        elif folder not in listed and not any(inside(r, folder) for r in roots):  # a root is never narrowed
            if not _within(folder, bound):
                bound.append(folder)
            continue
        for repo in (folder, *_inner_repos(folder)[0]):
            for path in _surface(repo):
                signature = _signature(path)
                if signature is not None:
                    seen[path] = signature
                if path.name in _CONFIGS and signature and stat.S_ISREG(signature[0]) and signature[2] <= _MAX_CONFIG:
                    with contextlib.suppress(OSError):
                        configs[path] = path.read_bytes()
    tree = _tree_paths(found, roots)
    return Survey(roots, listed, found.repos, tuple(bound), tuple(made), seen, configs, complete, tree)


# --- what a config points git at in the working tree ---------------------------------------------

_MAX_INCLUDES = 10  # git's own limit on nested includes
_TOKEN = re.compile(r"[^\s;&|()<>`'\"=]+")
# Settings that name a file git reads only as data (patterns, a message, revisions to skip, names):
# what a command writes there runs nothing, so the file stays writable (a reformat adds to the
# ignore-revs file).
_DATA_PATHS = (
    "core.excludesfile",
    "core.attributesfile",  # selects only drivers a config defines, as .gitattributes in the tree does
    "commit.template",
    "blame.ignorerevsfile",
    "mailmap.file",
    "gpg.ssh.allowedsignersfile",
    "gpg.ssh.revocationfile",
)
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b"}


def _tree_paths(found: _Found, roots: tuple[Path, ...]) -> tuple[TreePath, ...]:
    """Every path in ``roots``, outside the repositories' folders, that a config of a repository in
    ``found`` (its own, or the person's global and system ones) points git at: a hooks folder, a
    settings file it includes, a script a setting runs. Relative paths are taken as git takes them:
    from the working tree's top (from the repository's folder when it has none), an include's from
    the folder of the file that names it."""
    folders = [str(f) for f in found.repos.values()]
    tops = [str(r) for r in roots]
    shown = roots[0] if roots else Path("/")
    person = [setting for config in _person_configs() for setting in _settings(config, 0)]
    kept: dict[Path, TreePath] = {}
    repos = [(f, _work_trees(f, found.via.get(k, ()))) for k, f in sorted(found.repos.items(), key=lambda i: i[1])]
    for folder, trees in [*repos, *_around(roots)]:
        common = _common(folder)
        own = [*((common / "config",) if common else ()), *(folder / n for n in _CONFIGS)]
        for config, name, value in itertools.chain(person, *(_settings(c, 0) for c in own)):
            for path, why, program in _named(name, value, config, trees):
                where = real(path)
                if path in kept or not _under(str(where), tops) or any(_under(r, [str(where)]) for r in tops):
                    continue  # read-only already, or a writable root itself (never narrowed)
                if _under(str(where), folders):
                    continue  # in a repository's folder: bound or checked as that
                st = _stat(path, follow=True)
                if program and st is not None and stat.S_ISDIR(st.st_mode):
                    continue  # a folder a command line names (cd src): git runs nothing there
                said = os.path.relpath(config, shown) if inside(config, shown) else str(config)
                bound = where if st is not None else None
                kept[path] = TreePath(path, folder, f"{name} in {said}: {why}", program, _signature(path), bound)
    return tuple(kept.values())


def tree_paths(root: Path, folders: Iterable[Path], listed: Iterable[Path] = ()) -> tuple[TreePath, ...]:
    """What the configs point git at in ``root`` (a real path) and ``listed`` (the real ``writable``
    paths, never narrowed), for the file tools, which look only at the path they write: the
    configs of the repositories a ``.git`` in one of ``folders`` (the path's own folders) and the
    one around ``root`` lead to, what they include, and the person's. No walk: one ``lstat`` a folder."""
    found = _Found()
    for folder in folders:
        dot_git = folder / ".git"
        st = _stat(dot_git)
        if st is not None:
            target = dot_git if stat.S_ISDIR(st.st_mode) else git_dir_elsewhere(dot_git)
            if target is not None:
                found.add(target, *(() if target == dot_git else (dot_git,)))
    return _tree_paths(found, (root, *listed))


def read_only_note(before: Survey, output: str, cwd: Path) -> str:
    """Why the paths a config points git at that a command's output names (its write refused) were
    read-only; "" when it names none."""
    if "Read-only file system" not in output and "Device or resource busy" not in output:
        return ""
    named = [t for t in before.tree if t.bound is not None and _Aside(t.repo, cwd).shown(t.path) in output]
    if not named:
        return ""
    which = "; ".join(f"{_Aside(t.repo, cwd).shown(t.path)} ({t.why})" for t in named)
    return (
        f"[refused: {which}: read-only to sandboxed commands, as .git is, since the user's own git runs or "
        "reads it outside the sandbox, with their rights. If the task needs it changed, tell the user what and why.]"
    )


def _under(path: str, folders: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``folders`` or below one (all normalised): _within, on strings, for
    the paths every setting names."""
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _person_configs() -> list[Path]:
    """The configs git reads for every repository of the person's (their global and system ones)."""
    env = os.environ
    xdg = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    globals_ = [env["GIT_CONFIG_GLOBAL"]] if env.get("GIT_CONFIG_GLOBAL") else [f"{xdg}/git/config", "~/.gitconfig"]
    system = [] if env.get("GIT_CONFIG_NOSYSTEM") else [env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"]
    return [Path(os.path.expanduser(p)) for p in (*system, *globals_)]


def _around(roots: tuple[Path, ...]) -> Iterator[tuple[Path, list[Path]]]:
    """The repository each root is inside of (a package of a monorepo as the working directory), as
    git finds it from there: the nearest ``.git`` above; with the folder it is in, its working tree."""
    for root in roots:
        for above in root.parents:
            dot_git = above / ".git"
            st = _stat(dot_git)
            if st is not None:
                folder = dot_git if stat.S_ISDIR(st.st_mode) else git_dir_elsewhere(dot_git)
                if folder is not None:
                    yield real(folder), [above]
                break


def _work_trees(folder: Path, via: Iterable[Path]) -> list[Path]:
    """Where git runs hooks and programs for the repository in ``folder``: the folders its ``.git``
    folder, file or link is in; the folder itself when it is bare."""
    trees = [folder.parent] if folder.name == ".git" else []
    trees += [v.parent for v in via if v.name == ".git"]
    return list(dict.fromkeys(trees)) or [folder]


def _settings(config: Path, depth: int) -> Iterator[tuple[Path, str, str]]:
    """(the file, the setting's name, its value) for each setting in ``config`` and in the files it
    includes (the includes' conditions are not weighed: each may hold)."""
    st = _stat(config, follow=True)
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_CONFIG or depth > _MAX_INCLUDES:
        return
    try:
        text = config.read_bytes().decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    except OSError:
        return
    for _, _, name, raw in _entries(text):
        if not name or _pattern(name) in SAFE_KEYS:  # the settings git init writes: data
            continue
        value = _value(raw)
        yield config, name, value
        if _is_include(name) and value:
            yield from _settings(_resolve(config.parent, value), depth + 1)


def _is_include(name: str) -> bool:
    parts = name.lower().split(".")
    return parts[-1] == "path" and ((parts[0] == "include" and len(parts) == 2) or parts[0] == "includeif")


def _value(raw: str | None) -> str:
    """A setting's value as git reads it: quotes and escapes undone, a comment cut, the spaces
    around it dropped (those inside quotes kept)."""
    if raw is None:
        return "true"
    if not any(c in raw for c in '"\\#;'):
        return raw.strip(" \t")
    out: list[str] = []
    end = 0  # what is kept: up to the last character that is quoted or not a space
    quoted = False
    chars = iter(raw.lstrip(" \t"))
    for c in chars:
        if c == '"':
            quoted = not quoted
            end = len(out)
            continue
        if c in "#;" and not quoted:
            break
        if c == "\\":
            c = next(chars, "")
            c = _ESCAPES.get(c, c)
        out.append(c)
        if quoted or c not in " \t":
            end = len(out)
    return "".join(out[:end])


def _resolve(base: Path, value: str) -> Path:
    return Path(os.path.normpath(base / os.path.expanduser(value)))


def _named(name: str, value: str, config: Path, trees: list[Path]) -> Iterator[tuple[Path, str, bool]]:
    """The paths setting ``name = value`` (read from ``config``) points git at, each with why and
    whether a setting runs it as a program."""
    parts = name.split(".")
    last = parts[-1].lower()
    pattern = _pattern(name)
    if _is_include(name):
        yield _resolve(config.parent, value), "git reads settings from it", False
    elif parts[0] == "core" and last == "hookspath":
        for tree in trees:
            hooks = _resolve(tree, value)
            yield hooks, "git runs the hooks in it", False
            folders = [hooks]
            if hooks.name == "_":  # husky 9's layout: its hooks run the ones beside them, in the folder above
                yield hooks.parent, f"git runs the hooks in {hooks.name}/, which run those in it", False
                folders.append(hooks.parent)
            for folder in folders:  # a hook that is a link runs what it leads to, which the bind does not cover
                for link in (folder / n for n in _names(folder) if os.path.islink(folder / n)):
                    yield real(link), f"a hook in {folder.name}/ leads to it: git runs it", True
    elif pattern not in SAFE_KEYS and pattern not in _DATA_PATHS and (parts[0] != "alias" or value.startswith("!")):
        for word in _words(value):
            for tree in trees:  # git runs what a setting names from the working tree's top
                path = _resolve(tree, word)
                if "/" in word or os.path.lexists(path):
                    yield path, "git runs it", True


def _words(value: str) -> list[str]:
    """The words of a command line a setting holds (an alias's leading ``!`` dropped), but options:
    as the shell splits it, and each run of characters between spaces, quotes and the shell's
    operators, so a path inside ``sh -c './x.sh "$@"'`` or after ``--config=`` is one too."""
    line = value.removeprefix("!")
    try:
        words = shlex.split(line)
    except ValueError:
        words = []
    words += _TOKEN.findall(line)
    return [w for w in dict.fromkeys(words) if not w.startswith("-")]


def _pattern(name: str) -> str:
    """A setting's name as SAFE_KEYS spells it: ``remote.origin.url`` is ``remote.*.url``."""
    parts = name.split(".")
    parts[-1] = parts[-1].lower()
    return f"{parts[0]}.*.{parts[-1]}" if len(parts) > 2 else ".".join(parts)


def _is_made(folder: Path) -> bool:
    st = _stat(folder / MADE)
    return st is not None and stat.S_ISREG(st.st_mode)


def _mark(folder: Path) -> None:
    """Say in ``folder`` that a sandboxed command made it (and it was checked): later commands may
    write it. No command can put this in a repository it did not make: those are read-only to it."""
    with contextlib.suppress(OSError):
        fd = os.open(folder / MADE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "w") as f:
            f.write(_MADE_TEXT)


# --- after the command ---------------------------------------------------------------------------


def check(before: Survey, since_ns: int, cwd: Path) -> list[str]:
    """Undo what a command that started at ``since_ns`` wrote into repositories git would run;
    one phrase per thing moved or taken out, with its path from ``cwd``."""
    since = since_ns - _MARGIN_NS
    after, _ = _walk(before.roots, since)
    said: list[str] = []
    for key, folder in sorted(after.repos.items(), key=lambda item: item[1]):
        if not _within(folder, before.roots) or _within(folder, before.bound):
            continue  # the command could not write it
        if key in before.repos:  # listed (or a writable root itself): what changed during the command
            old: Survey | None = before
        elif _changed(folder, after.via.get(key, []), since, before.roots):
            old = None  # made by this command, or reached through what it wrote: nothing is the user's
        else:
            continue  # past the walk's end before the command, and untouched
        inner, whole = _inner_repos(folder)
        for repo in (folder, *inner):
            if _within(real(repo), before.roots) and not _within(real(repo), before.bound):
                said += _clean(repo, old, before.roots, cwd)
        if not whole:
            said.append(
                f"{_Aside(folder, cwd).shown(folder)} (more than {MAX_FOLDERS:,} folders in its modules and "
                f"worktrees: the hooks and settings of those past them were not checked and may be {_LEFT})"
            )
        if old is None:
            _mark(folder)
    return said + _check_tree(before, cwd)


def _check_tree(before: Survey, cwd: Path) -> list[str]:
    """Take out what now stands where a config points git in the working tree and did not before the
    command: a path it made, or one it put in place of the person's (their folder moved away, which
    a read-only path does not stop). Kept under ``refused-by-tether/TIME/worktree/`` in the folder of
    the repository whose git reads it."""
    said: list[str] = []
    for item in before.tree:
        now = _signature(item.path)
        if now is None or now == item.signature or (item.program and stat.S_ISDIR(now[0])):
            continue
        aside = _Aside(item.repo, cwd)
        source = _in_roots(item.path, before.roots)
        if source is None:
            said.append(
                f"{aside.shown(item.path)} ({item.why}; it could not be found in the workspace to take out: {_LEFT})"
            )
            continue
        root = next(r for r in before.roots if _within(source, (r,)))
        said += aside.move(f"worktree/{os.path.relpath(source, root)}", item.why, source=source)
    return said


def _in_roots(path: Path, roots: tuple[Path, ...]) -> Path | None:
    """``path`` with the links in its folders resolved, if that is in ``roots``; else the link in its
    way that leads out of them (one a command put there: git would follow it), or None."""
    for step in (path, *path.parents):  # the deepest first
        parent = real(step.parent)
        if _within(parent, roots):
            return parent / step.name
    return None


def _changed(folder: Path, via: list[Path], since: int, roots: tuple[Path, ...]) -> bool:
    """Whether a command could have made ``folder`` a repository it finds: any of its marks, the
    files that lead to it, or a folder above either (short of a root) changed. A folder above: a
    repository made where the walk does not look (``node_modules``) and moved out by moving its
    parent keeps its own files' ctime."""
    paths = [folder, *(folder / m for m in _MARKERS), *via]
    for path in (folder, *via):
        paths += itertools.takewhile(lambda p: p not in roots and _within(p, roots), path.parents)
    return any(st is not None and st.st_ctime_ns >= since for st in map(_stat, paths))


def _inner_repos(folder: Path) -> tuple[list[Path], bool]:
    """The folders of a repository's submodules and worktrees (``modules/**``, ``worktrees/*``):
    git reads their config (a submodule's when ``git submodule update`` enters it); False when
    there were more than MAX_FOLDERS folders to look through and the rest were not."""
    queue = deque([folder / "modules", folder / "worktrees"])
    inner: list[Path] = []
    seen = 0
    while queue:
        seen += 1
        if seen > MAX_FOLDERS:
            return inner, False
        current = queue.popleft()
        names = _names(current)
        if current.parent != folder and ("HEAD" in names or "config" in names):
            inner.append(current)
        queue.extend(current / n for n in names if n not in (*_NOT_REPOS, ASIDE) and _is_folder(current / n))
    return inner, True


def _is_folder(path: Path) -> bool:
    st = _stat(path)  # not a link: it could lead out of the workspace
    return st is not None and stat.S_ISDIR(st.st_mode)


def _open_up(*folders: Path) -> None:
    """Give the owner back read, write and search on ``folders`` (real folders, not links), which a
    command may have taken away so that nothing could be moved out of them."""
    for folder in folders:
        st = _stat(folder)
        if st is not None and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IRWXU != stat.S_IRWXU:
            with contextlib.suppress(OSError):
                os.chmod(folder, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)


def _names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as listing:
            return sorted(e.name for e in listing)
    except OSError:
        return []


def _clean(folder: Path, old: Survey | None, roots: tuple[Path, ...], cwd: Path) -> list[str]:
    """Take out of ``folder`` what git would run that is not as ``old`` saw it (None: all of it)."""

    def new(path: Path) -> bool:
        signature = _signature(path)
        return signature is not None and (old is None or old.seen.get(path) != signature)

    said: list[str] = []
    aside = _Aside(folder, cwd)
    hooks = folder / "hooks"
    _open_up(folder, hooks)  # a command can chmod them shut; tether owns what the command made
    st = _stat(hooks)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        if new(hooks):
            said += aside.move("hooks", "not a folder: git would run the hooks where it leads")
    elif st is not None:
        try:
            os.listdir(hooks)
        except OSError as exc:
            said.append(f"{aside.shown(hooks)} (it cannot be read ({exc.strerror}), so its hooks are {_LEFT})")
        for path in _surface(folder):
            if path.parent == hooks and new(path):
                said += aside.move(f"hooks/{path.name}", "a hook: git runs it")
    todo = folder / _TODO
    if new(todo) and _runs(todo):
        said += aside.move(
            "rebase-merge", "a paused rebase with steps that run commands: git rebase --continue runs them"
        )
    for name in _CONFIGS:
        path = folder / name
        st = _stat(path)
        if st is None or not new(path):
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_CONFIG:
            said += aside.move(name, "not a plain file git could be trusted to read")
            continue
        said += _clean_config(aside, name, old.configs.get(path, b"") if old else b"", roots)
    return said


def _runs(todo: Path) -> bool:
    """Whether a rebase's steps hold an ``exec`` (``x``) line, or cannot be read to be sure."""
    st = _stat(todo)
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_CONFIG:
        return True
    try:
        return _EXEC.search(todo.read_bytes()) is not None
    except OSError:
        return True


class _Aside:
    """Where what is taken out of one repository's folder is kept: a folder made afresh under
    ``refused-by-tether/`` (named by the time), so nothing the command put there is written through."""

    def __init__(self, folder: Path, cwd: Path) -> None:
        self.folder, self.cwd = folder, cwd
        self.made: Path | None = None

    def _where(self) -> Path:
        if self.made is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            for n, m in itertools.product(range(20), range(20)):
                top = self.folder / (ASIDE if n == 0 else f"{ASIDE}-{n}")
                with contextlib.suppress(FileExistsError):
                    top.mkdir()
                st = _stat(top)
                if st is None or not stat.S_ISDIR(st.st_mode):
                    continue
                with contextlib.suppress(FileExistsError):
                    (top / (stamp if m == 0 else f"{stamp}-{m}")).mkdir()
                    self.made = top / (stamp if m == 0 else f"{stamp}-{m}")
                    break
            else:
                raise OSError(errno.EEXIST, f"no room for {ASIDE} in {self.folder}")
        return self.made

    def move(self, rel: str, why: str, source: Path | None = None) -> list[str]:
        """Move ``source`` (``rel`` in the repository's folder when None) to ``rel`` in the aside folder."""
        source = self.folder / rel if source is None else source
        try:
            target = self._where() / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source, target)
        except OSError as exc:  # what git would run must not stay
            with contextlib.suppress(OSError):
                os.unlink(source)
            gone = "so it was deleted" if _stat(source) is None else f"and it is {_LEFT}"
            return [f"{self.shown(source)} ({why}; it could not be kept aside ({exc.strerror}), {gone})"]
        return [f"{self.shown(source)} ({why}; moved to {self.shown(target)})"]

    def keep(self, name: str, data: bytes) -> Path:
        target = self._where() / name
        with open(target, "xb") as f:
            f.write(data)
        return target

    def shown(self, path: Path) -> str:
        return os.path.relpath(path, self.cwd) if inside(path, self.cwd) else str(path)


def _entries(text: str) -> Iterator[tuple[str, str | None, str | None, str | None]]:
    """Each line of a git config as (line to write, section, name of its setting or None, value):
    a header's name is its section's, a comment's or blank line's is ''."""
    section: str | None = None
    for raw in text.split("\n"):
        line = raw.removesuffix("\r")
        header = _HEADER.match(line)
        if header:
            name, sub = header.group(1).lower(), header.group(2)
            section = name if sub is None else f"{name}.{sub}"
            rest = line[header.end() :]
            if _BLANK.fullmatch(rest):
                yield raw, section, "", None
                continue
            yield line[: header.end()], section, "", None
            line = raw = rest
        elif _BLANK.fullmatch(line) and "\0" not in line:
            yield raw, section, "", None
            continue
        entry = _ENTRY.fullmatch(line)
        if entry is None or section is None or "\0" in line or line.rstrip().endswith("\\"):
            yield raw, section, None, None  # not a setting this reader can be sure of
        else:
            yield raw, section, f"{section}.{entry.group(1)}", entry.group(2)


def _safe(name: str, value: str | None, folder: Path, roots: tuple[Path, ...]) -> bool:
    parts = name.split(".")
    parts[-1] = parts[-1].lower()
    if _pattern(name) not in SAFE_KEYS:
        return False
    if parts[-1] in ("url", "pushurl") and "::" in (value or "").replace('"', ""):  # ext::sh -c, a remote helper
        return False
    if parts == ["core", "worktree"]:  # where git checks files out: only somewhere the command could write
        plain = _PLAIN_PATH.fullmatch((value or "").strip())
        return plain is not None and _within(real(folder / plain.group(1).strip()), roots)
    return True


def _clean_config(aside: _Aside, name: str, was_bytes: bytes, roots: tuple[Path, ...]) -> list[str]:
    """Take out of a config the settings not in SAFE_KEYS that were not in ``was_bytes``."""
    folder = aside.folder
    path = folder / name
    try:
        data = path.read_bytes()
    except OSError as exc:
        return aside.move(name, f"it could not be read ({exc.strerror})")
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    was = Counter(
        (section, line.strip())
        for line, section, key, _ in _entries(was_bytes.decode("utf-8", "surrogateescape"))
        if key != ""
    )
    kept: list[str] = []
    removed: list[str] = []
    for line, section, key, value in _entries(text):
        if key == "" or (key is not None and _safe(key, value, folder, roots)):
            kept.append(line)
        elif was[(section, line.strip())] > 0:  # there before the command: the user's own
            was[(section, line.strip())] -= 1
            kept.append(line)
        else:
            removed.append(key or f"the unreadable line {line.strip()[:40]!r}")
    if not removed:
        return []
    try:
        kept_as = aside.keep(name, data)
        fd, fresh = tempfile.mkstemp(prefix=f".{name}.", suffix=".tether-tmp", dir=folder)
        with open(fd, "wb") as f:
            f.write("\n".join(kept).encode("utf-8", "surrogateescape"))
        os.chmod(fresh, stat.S_IMODE(os.lstat(path).st_mode))
        os.replace(fresh, path)
    except OSError as exc:
        why = f"settings that can run programs: {', '.join(removed)}; rewriting it failed ({exc.strerror})"
        return aside.move(name, why)
    return [
        f"{aside.shown(path)}: {', '.join(removed)} (settings that can run programs or reach outside the "
        f"workspace; taken out, the whole file kept as {aside.shown(kept_as)})"
    ]
