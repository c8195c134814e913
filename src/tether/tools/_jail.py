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
            wanted.append(real(where()))
    for home in homes():
        base = real(home)
        if inside(root, base) or inside(base, root):
            wanted += [base / name for name in SECRETS]
    found = (real(p) for p in wanted if root in p.parents and os.path.lexists(p))
    return list(dict.fromkeys(p.relative_to(root).parts for p in found if root in p.parents))


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
    """The folders ``jail`` lets a command write (none in read-only mode), links resolved."""
    return [real(jail.cwd), *(real(p) for p in jail.writable)] if jail.write_cwd else []


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
            elif (
                name == ".tether"
                and not os.path.lexists(inner)
                and real(inner) not in listed
                and os.access(root, os.W_OK)
            ):
                # Not there yet: an empty read-only one in its place (left behind, empty), or the
                # command could make it and plant project skills that later runs read as instructions.
                # (Where tether cannot write, neither can the command, and bwrap could not make it.)
                yield from ("--tmpfs", str(inner), "--remount-ro", str(inner))
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
    hidden = [path for path in jail.hidden if not inside(cwd, path)]  # a workspace in one: the user's choice
    for path in hidden:
        # One inside another hidden folder is hidden with it (bubblewrap could not make its mount
        # point in that folder's read-only cover: every command failed).
        if not any(other in path.parents for other in hidden):
            args += _hide(path)
    for source, target in jail.binds:
        args += ["--bind", str(source), target]
    return [*args, "--chdir", str(cwd)]
