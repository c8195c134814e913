"""The operating-system sandbox around a shell command: bubblewrap's namespaces and bind mounts.

The command runs under ``bwrap`` in new user, mount, PID, network and IPC namespaces:

* the whole file system read-only (``--ro-bind / /``), a private empty ``/tmp`` and ``/run``
  (where the system's Unix sockets live: docker, D-Bus, systemd), a minimal ``/dev`` and its
  own ``/proc``;
* ``workspace-write``: the working directory and the listed paths bound writable again, and in
  each of them ``.git`` and ``.tether`` bound read-only again unless listed themselves, and so is
  every repository folder found deeper (:mod:`tether.tools._gitguard`, which also checks after the
  command what it wrote into a repository it made);
* secrets hidden in every home (``~/.ssh``, ``~/.aws``, ``~/.config/gcloud``...), and tether's
  own home, whatever the mode; with ``home = "hidden"``, the homes themselves;
* no network (an empty network namespace: only its own loopback), unless hosts are allowed, and
  then only through tether's proxy (see :mod:`tether.tools._netproxy`);
* no capabilities (``--cap-drop ALL``, also as root), ``no_new_privs`` (a setuid binary gains
  nothing), no further user namespaces (``--disable-userns``), its own session.

bubblewrap was chosen over util-linux ``unshare`` plus a script of ``mount`` calls, and over
Landlock plus seccomp, by measurement and by what each covers: see docs/tools.md ("The sandbox").
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tether.config import tether_home

__all__ = ["SECRETS", "Jail", "bwrap_path", "jail_args", "probe", "secrets_inside"]

# Never readable inside the sandbox, in any home: keys, tokens, credentials, shell history.
SECRETS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".gnupg",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".config/gh",
    ".config/hub",
    ".terraform.d",
    ".vault-token",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".bash_history",
    ".zsh_history",
    ".config/tether",
    ".local/share/tether",
)
# Of SECRETS, those that are files (the rest are folders): what cover_missing_secrets makes.
_SECRET_FILES = frozenset(
    {".netrc", ".git-credentials", ".pypirc", ".npmrc", ".vault-token", ".bash_history", ".zsh_history"}
)
# Inside a writable root, read-only unless listed: git's hooks and config run code outside the
# sandbox later, and tether's project settings decide what the agent may do.
PROTECTED_INSIDE = (".git", ".tether")
_SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
_BASE = (
    "--unshare-user",
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",  # not UTS or cgroup: nothing to protect there, and each namespace costs a start
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
)


@dataclass(frozen=True)
class Jail:
    """What one command may touch."""

    cwd: Path
    writable: tuple[Path, ...] = ()  # besides the working directory (workspace-write only)
    write_cwd: bool = True  # False: read-only mode
    binds: tuple[tuple[Path, str], ...] = ()  # (host directory, where it appears): the proxy's socket
    hide_homes: bool = False
    hidden: tuple[Path, ...] = ()  # the paths never readable (secret_paths())
    readable: tuple[Path, ...] = ()  # shown again inside hidden homes (the bridge's Python)
    # Repository folders found at any depth in the writable paths (_gitguard.survey): read-only too.
    repositories: tuple[Path, ...] = ()
    made: tuple[Path, ...] = ()  # repositories a sandboxed command made: writable, checked after


def bwrap_path() -> str | None:
    return shutil.which("bwrap") or shutil.which("bwrap", path=_SYSTEM_PATH)


@functools.cache
def probe(bwrap: str) -> str | None:
    """None when bubblewrap can build the sandbox here; else why not, in bubblewrap's words."""
    argv = [bwrap, *_BASE, "--unshare-net", "/bin/sh", "-c", "echo sandboxed"]
    try:
        done = subprocess.run(argv, cwd="/", env={"PATH": _SYSTEM_PATH}, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.stdout.strip() == b"sandboxed":
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else f"exit status {done.returncode}"


def homes() -> list[Path]:
    """Every home on the machine this process can name: its own, root's, and those under /home."""
    found = [Path.home(), Path("/root")]
    with contextlib.suppress(OSError):
        found += sorted(p for p in Path("/home").iterdir() if p.is_dir())
    return list(dict.fromkeys(found))


def real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def secret_paths(extra: Iterable[Path] = ()) -> list[Path]:
    """The existing paths to hide: the secrets of every home, tether's home, and ``extra``, and
    what the links directly inside those folders lead to (see :func:`_linked_from`)."""
    from tether.config import _platform_data_dir
    from tether.fileio import kept_from_commands

    wanted = [h / name for h in homes() for name in SECRETS]
    wanted += [tether_home(), _platform_data_dir(), *extra, *kept_from_commands()]
    found = list(dict.fromkeys(real(p) for p in wanted if os.path.lexists(p)))  # most do not exist
    return list(dict.fromkeys([*found, *(t for p in found for t in _linked_from(p))]))


def cover_missing_secrets(roots: Iterable[Path]) -> list[Path]:
    """Make, empty, each secret of a home that lies in a writable root (tether run in the home) and
    is not there yet: a folder 0700, a file 0600 (empty), owned by the home's owner; what was made.

    The sandbox hides a secret by covering the path that exists; one that does not could be made by
    a command (``mkdir ~/.ssh`` and an ``authorized_keys`` in it, a ``~/.aws/config`` whose
    ``credential_process`` runs a program, a ``~/.local/share/tether/config.toml`` that sends every
    conversation to another endpoint), so each is made first and then covered like the others.
    Made beneath descriptors with ``O_NOFOLLOW``: a link a command put in the way is not followed."""
    writable = [real(r) for r in roots]
    made: list[Path] = []
    for home in homes():
        base = real(home)
        if not any(inside(base, root) for root in writable) or not base.is_dir():
            continue
        owner = base.stat()
        for name in SECRETS:
            if not os.path.lexists(base / name):
                with contextlib.suppress(OSError):  # a folder in the way, a full disk: left uncovered
                    _make_empty(base, name.split("/"), name in _SECRET_FILES, owner)
                    made.append(base / name)
    return made


def _make_empty(base: Path, parts: list[str], is_file: bool, owner: os.stat_result, mode: int = 0o700) -> None:
    fds = [os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    try:
        for part in parts[:-1]:  # .config, .local/share, when missing: 0755, as XDG's are made (a
            # 0700 one of another user could not be looked through by bubblewrap as root)
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fds[-1])
                _give(part, fds[-1], owner)
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
        last = parts[-1]
        if is_file:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(last, flags, 0o600, dir_fd=fds[-1]))
        else:
            os.mkdir(last, mode, dir_fd=fds[-1])
        _give(last, fds[-1], owner)
    finally:
        for fd in fds:
            os.close(fd)


def _give(name: str, dir_fd: int, owner: os.stat_result) -> None:
    """``name`` to the home's owner (tether as root, in another user's home)."""
    if os.geteuid() == 0 and (owner.st_uid, owner.st_gid) != (0, 0):
        os.chown(name, owner.st_uid, owner.st_gid, dir_fd=dir_fd, follow_symlinks=False)


def secrets_inside(root: Path) -> list[tuple[str, ...]]:
    """The secrets :func:`secret_paths` hides that lie strictly inside ``root`` (a resolved folder),
    as paths relative to it: what the file tools refuse in a working directory that holds a home's
    keys or tether's own home (tether run in the home). Only folders that can hold one are looked
    at, so a project folder costs a few string comparisons and no system call per home."""
    from tether.config import _platform_data_dir
    from tether.errors import ConfigError

    wanted = []
    for where in (tether_home, _platform_data_dir):
        with contextlib.suppress(ConfigError, RuntimeError):  # none to be found: tether cannot start so
            if os.path.lexists(found := real(where())):
                wanted.append(found)
    for home in homes():
        base = real(home)
        if inside(root, base) or inside(base, root):
            # Whether there or not yet: write_file would make a missing one (.ssh/authorized_keys).
            wanted += [real(base / name) for name in SECRETS if root in (base / name).parents]
    return list(dict.fromkeys(p.relative_to(root).parts for p in wanted if root in p.parents))


def _linked_from(folder: Path) -> Iterator[Path]:
    """What the links directly inside a hidden folder lead to: covering the folder covers a link, not
    the file it names, and a key kept elsewhere is linked in (a ``config.toml`` holding an
    ``api_key`` linked from a dotfiles repository, as tether's config reading allows; an
    ``id_rsa`` kept on a key drive). One listing per folder, no deeper: these folders are small,
    but tether's home holds every run."""
    try:
        with os.scandir(folder) as listing:
            links = [Path(entry.path) for entry in listing if entry.is_symlink()]
    except OSError:  # a file, or a folder this process cannot list (so cannot follow either)
        return
    for link in links:
        target = real(link)
        if target.exists() and target != Path("/"):
            yield target


def _hide(path: Path) -> list[str]:
    if path.is_dir():
        return ["--tmpfs", str(path), "--remount-ro", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def cover_lost(code: int | None, output: bytes, hidden: Iterable[Path]) -> bool:
    """Whether bubblewrap stopped while building the sandbox (the command never ran) because a
    hidden path vanished after the sandbox's arguments were made: its one line of output names the
    path, which is gone. Building it again, from a new listing, then runs the command."""
    if code != 1 or not output.startswith(b"bwrap: ") or output.rstrip(b"\n").count(b"\n"):
        return False
    said = output.decode(errors="replace")
    return any(str(path) in said and not os.path.lexists(path) for path in hidden)


def git_dir_elsewhere(dot_git: Path) -> Path | None:
    """The repository folder a ``.git`` link, or a ``.git`` file (``gitdir: PATH``, as a submodule or
    a worktree has), leads to: git runs its config and hooks as it would a ``.git`` folder's."""
    try:
        if dot_git.is_symlink():
            target = real(dot_git)
        elif dot_git.is_file():  # read as git's read_gitfile does: all of it, only the line ends stripped
            with dot_git.open("rb") as f:
                data = f.read(1 << 20).rstrip(b"\r\n").split(b"\0", 1)[0]
            if not data.startswith(b"gitdir: "):
                return None
            target = real(dot_git.parent / data.removeprefix(b"gitdir: ").decode("utf-8", "surrogateescape"))
        else:
            return None
    except (OSError, ValueError):
        return None
    return target if target.is_dir() else None


def writable_roots(jail: Jail) -> list[Path]:
    """The folders ``jail`` lets a command write (none in read-only mode), links resolved.

    A listed path reached through a link that lies where a command may write (the working
    directory, a listed path, or what one leads to) is made writable only if it leads back inside
    the working directory: a command could have made that link (``rm -rf cache; ln -s /etc cache``
    with ``writable = ["cache"]``), and the next command would have been given ``/etc`` to write.
    A person's own link there that leads out is refused the same way; list its target instead."""
    if not jail.write_cwd:
        return []
    cwd = real(jail.cwd)
    listed = [Path(os.path.abspath(p)) for p in jail.writable]
    areas = [cwd, *listed, *(real(p) for p in listed)]
    roots = [cwd]
    for path in listed:
        found = _beneath_writable(path, areas, cwd)
        if found is None:
            if path not in _REFUSED_WRITABLE:
                _REFUSED_WRITABLE.add(path)
                _log.warning(
                    "writable path %s is reached through a link where a command may write, leading to %s "
                    "outside the working directory: not made writable (a command could have made that "
                    "link); list the folder it leads to itself if it should be writable",
                    path,
                    real(path),
                )
            continue
        roots.append(found)
    return list(dict.fromkeys(roots))


_REFUSED_WRITABLE: set[Path] = set()  # said once each
_log = logging.getLogger("tether.tools.shell")


def _beneath_writable(path: Path, areas: list[Path], cwd: Path) -> Path | None:
    """``path`` (absolute, normalised) resolved one component at a time; None when a link on the
    way lies in one of ``areas`` and leads outside ``cwd``."""
    current = Path("/")
    for part in path.parts[1:]:
        step = current / part
        if step.is_symlink():
            target = real(step)
            if any(inside(current, area) for area in areas) and not inside(target, cwd):
                return None
            step = target
        current = step
    return current


def _writable_args(jail: Jail) -> Iterator[str]:
    roots = writable_roots(jail)
    listed = {real(p) for p in jail.writable} | set(jail.made)
    for root in roots:
        if root.exists():
            yield from ("--bind", str(root), str(root))
    for folder in _holding_secrets(roots, jail.hidden):
        yield from ("--bind", str(folder), str(folder))
    for root in roots:
        for name in PROTECTED_INSIDE:
            inner = root / name
            if name == ".tether" and not os.path.lexists(inner) and real(inner) not in listed:
                # Not there yet: made empty, and bound read-only below like one that is (left behind,
                # empty), or the command could make it and plant project skills that later runs read
                # as instructions. Made by tether, not by bubblewrap: as root in a folder another user
                # owns (a container's mounted project), bubblewrap could not, and every command failed.
                with contextlib.suppress(OSError):  # where tether cannot write, neither can the command
                    _make_empty(root, [name], False, root.stat(), mode=0o755)
            if os.path.lexists(inner) and real(inner) not in listed and not inner.is_symlink():
                yield from ("--ro-bind", str(inner), str(inner))
            if name == ".git":
                gitdir = git_dir_elsewhere(inner)
                # inside a writable root (elsewhere it is read-only already), never a root itself
                if (
                    gitdir is not None
                    and gitdir not in listed
                    and any(inside(gitdir, r) for r in roots)
                    and not any(inside(r, gitdir) for r in roots)
                ):
                    yield from ("--ro-bind", str(gitdir), str(gitdir))
    done = {root / ".git" for root in roots} | {git_dir_elsewhere(root / ".git") for root in roots}
    for folder in jail.repositories:
        if folder not in done:
            yield from ("--ro-bind", str(folder), str(folder))


def _holding_secrets(roots: list[Path], hidden: Iterable[Path]) -> list[Path]:
    """The folders between a writable root and a hidden path inside it (a workspace that is a home
    holds ``.local/share/tether``), each to be bound onto itself, still writable: a mount point
    cannot be renamed or removed. Otherwise a command could ``mv .local .l``: the secrets are
    hidden by their path, so the next command, finding no ``.local/share/tether``, would hide
    nothing and read ``.l/share/tether/config.toml``. The hidden path is a mount point itself."""
    folders: list[Path] = []
    for path in hidden:
        for root in roots:
            if root in path.parents:
                folders += [p for p in reversed(path.parents) if root in p.parents]
    return list(dict.fromkeys(folders))


def jail_args(jail: Jail, bwrap: str) -> list[str]:
    """bubblewrap's argv for ``jail``, up to the command."""
    cwd = real(jail.cwd)
    args = [bwrap, *_BASE, "--unshare-net"]
    if os.path.isdir("/run") and not os.path.islink("/run"):  # the system's sockets: docker, dbus, systemd
        args += ["--tmpfs", "/run"]
    if jail.hide_homes:
        for home in homes():
            if home.is_dir():
                args += ["--tmpfs", str(real(home))]
        for path in jail.readable:
            args += ["--ro-bind", str(path), str(path)]
    if not jail.write_cwd:  # shown again, read-only, when it is under /tmp or a hidden home
        args += ["--ro-bind", str(cwd), str(cwd)]
    args += _writable_args(jail)
    # A workspace in one: the user's choice. One gone since it was listed (SQLite removes a -journal,
    # or a -wal when its last connection closes) hides nothing, and its cover would fail bubblewrap's
    # setup (no mount point can be made in the read-only root) or leave an empty file where it was.
    hidden = [path for path in jail.hidden if not inside(cwd, path) and os.path.lexists(path)]
    covered = set(hidden)
    for path in hidden:
        # One inside another hidden folder is hidden with it (bubblewrap could not make its mount
        # point in that folder's read-only cover: every command failed). Looked up by its parents,
        # not by every other path: a process that made thousands of stores (each kept from commands)
        # spent minutes here on every command.
        if not any(parent in covered for parent in path.parents):
            args += _hide(path)
    for source, target in jail.binds:
        args += ["--bind", str(source), target]
    return [*args, "--chdir", str(cwd)]
