"""Writers racing on one memory store never lose each other's entries: separate processes and
threads of one process, on both backends (files: an ``flock`` on a file beside the store;
Postgres: ``SELECT ... FOR UPDATE`` on the store's row, each process with a pool of its own)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections import Counter

from tests.memory.conftest import Stores

PER_WRITER = 40

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tether.memory import Memory

    where, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if where.startswith("postgresql://"):
        mem = Memory.open_postgres(where, notes_limit=100_000)
    else:
        mem = Memory.open(Path(where), notes_limit=100_000)
    print("ready", flush=True)
    sys.stdin.readline()  # wait until every writer has started: then they really race
    for i in range(count):
        change = mem.add("notes", f"Writer {who} recorded fact number {i:03d}.")
        assert change.changed, change.message
    print("done", flush=True)
""")


def _expected(writers: list[str]) -> Counter[str]:
    return Counter(f"Writer {w} recorded fact number {i:03d}." for w in writers for i in range(PER_WRITER))


def test_processes_adding_at_once_lose_nothing(stores: Stores) -> None:
    writers = ["alpha", "bravo", "charlie"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, stores.spec(), w, str(PER_WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in writers
    ]
    try:
        for p in procs:  # each has imported tether and opened the store
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:  # release them together
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "done"
    mem = stores.open(notes_limit=100_000)
    entries = mem.entries("notes")
    assert len(entries) == len(writers) * PER_WRITER
    assert Counter(entries) == _expected(writers)  # every entry, exactly once
    for w in writers:  # each writer's own entries keep their order
        own = [e for e in entries if e.startswith(f"Writer {w} ")]
        assert own == sorted(own)
    if stores.files:
        assert not list((stores.home / "memory").glob(".*.tmp"))


def test_threads_adding_at_once_lose_nothing(stores: Stores) -> None:
    writers = [f"t{n}" for n in range(4)]
    start = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def work(who: str) -> None:
        try:
            mem = stores.open(notes_limit=100_000)  # each thread with its own Memory, like separate agents
            start.wait()
            for i in range(PER_WRITER):
                assert mem.add("notes", f"Writer {who} recorded fact number {i:03d}.").changed
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    entries = stores.open(notes_limit=100_000).entries("notes")
    assert Counter(entries) == _expected(writers)


def test_threads_sharing_one_memory_mixing_adds_and_removes(stores: Stores) -> None:
    mem = stores.open(notes_limit=100_000)
    for i in range(PER_WRITER):
        mem.add("notes", f"Old fact {i:03d} to be removed.")
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def adder() -> None:
        try:
            start.wait()
            for i in range(PER_WRITER):
                mem.add("notes", f"New fact {i:03d} kept.")
        except BaseException as exc:
            errors.append(exc)

    def remover() -> None:
        try:
            start.wait()
            for i in range(PER_WRITER):
                mem.remove("notes", f"Old fact {i:03d}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=adder), threading.Thread(target=remover)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert mem.entries("notes") == [f"New fact {i:03d} kept." for i in range(PER_WRITER)]


def test_profile_and_notes_written_at_once_do_not_disturb_each_other(stores: Stores) -> None:
    mem = stores.open(profile_limit=100_000, notes_limit=100_000)
    start = threading.Barrier(2)

    def fill(store: str) -> None:
        start.wait()
        for i in range(PER_WRITER):
            mem.add(store, f"{store} entry {i:03d}")

    threads = [threading.Thread(target=fill, args=(s,)) for s in ("profile", "notes")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in ("profile", "notes"):
        assert mem.entries(store) == [f"{store} entry {i:03d}" for i in range(PER_WRITER)]
