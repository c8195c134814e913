"""A random search for RunStore sequences that break its crash guarantees (not run by the tests).

    python bench/store_fuzz.py START COUNT          # seeds START..START+COUNT-1
    TORN=1 python bench/store_fuzz.py 1000 2000     # a power cut keeps a random mix of pages

Each case runs 1 to 4 phases of up to 10 saves (durable or not, rewrites and compactions, messages
up to 40 KB), each phase ending in a kill -9 (every written byte stays) or a power cut at a random
fsync or between saves (each file keeps what its last fsync saw; with TORN=1, each 4 KiB page of
it comes from that or from what was written since). After a cut the run must load as one of the
states the guarantees allow; it is then resumed and continued. Written by an adversarial review on
2026-12-02: it found the faults fixed in 1dd2461, a1de4a8 and the commit after them (a run loaded
from a header saved without fsync makes its next commit durable; the oracle knows it).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import sys
import tempfile
import traceback
from pathlib import Path

from tether.errors import UserError
from tether.harness.state import RunState
from tether.harness.store import RunStore
from tether.messages import UserMessage

ROOT = Path(tempfile.mkdtemp(prefix="tether-store-fuzz-"))
RUN = "run_x"
SNAP = {}  # inode -> bytes synced
EVENTS = None  # list to append images to, or None

TORN = os.environ.get("TORN") == "1"


def image():
    d = ROOT / RUN
    img = {}
    if d.exists():
        for p in d.iterdir():
            st = p.stat()
            img[p.name] = (SNAP.get(st.st_ino, b""), p.read_bytes()) if TORN else SNAP.get(st.st_ino, b"")
    return img


def tear(img, rng):
    out = {}
    for name, v in img.items():
        if not TORN:
            out[name] = v
            continue
        old, cur = v
        n = rng.choice([len(old), len(cur)])
        old2 = old + b"\0" * max(0, len(cur) - len(old))
        buf = bytearray()
        for off in range(0, n, 4096):
            src = cur if rng.random() < 0.5 else old2
            buf += src[off : off + 4096].ljust(min(4096, n - off), b"\0")
        out[name] = bytes(buf[:n])
    return out


_real_fsync, _real_fdatasync = os.fsync, os.fdatasync


def _rec(fd):
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        with open(f"/proc/self/fd/{fd}", "rb") as f:
            SNAP[st.st_ino] = f.read()
    if EVENTS is not None:
        EVENTS.append(image())


def fake_fsync(fd):
    _rec(fd)


os.fsync = fake_fsync
os.fdatasync = fake_fsync


def dump(st):
    return st.model_dump_json(exclude={"commit_seq"})  # the run as saved, not the store's count of commits


def restore(img):
    d = ROOT / RUN
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    SNAP.clear()
    for name, data in img.items():
        (d / name).write_bytes(data)
        SNAP[(d / name).stat().st_ino] = data


def resnap_all():
    # after kill -9, nothing changes on disk; SNAP stays
    pass


SIZES = [5, 40, 300, 2000, 9000, 17000, 40000]


def rand_msg(rng):
    n = rng.choice(SIZES) if rng.random() < 0.3 else rng.randint(1, 200)
    return UserMessage.text(rng.choice("abcé你") * n)


class Fail(Exception):
    pass


def run_case(seed, verbose=False):  # noqa: C901 - one case, told in order
    global EVENTS
    rng = random.Random(seed)
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    SNAP.clear()
    log = []
    store = RunStore(ROOT)
    state = RunState(run_id=RUN)
    last_save = None
    last_durable = None
    counter = 0
    since = set()
    force = False  # a run loaded from disk makes its next commit durable
    for _phase in range(rng.randint(1, 4)):
        ops = rng.randint(1, 10)
        cut_events = []  # (image, acceptable set)
        for _i in range(ops):
            counter += 1
            k = rng.choice([0, 1, 1, 2, 3])
            for _ in range(k):
                state.messages.append(rand_msg(rng))
            rewrite = rng.random() < 0.15
            if rewrite and state.messages and rng.random() < 0.7:
                # compaction: drop some front messages, maybe replace
                drop = rng.randint(1, len(state.messages))
                state.messages = [UserMessage.text(f"summary{counter}"), *state.messages[drop:]]
            durable = rng.random() < 0.5  # asked; the store makes rewrites, and a loaded run's next commit, durable
            state.reason = f"save{counter}"
            cur = dump(state)
            log.append(("save", len(state.messages), rewrite, durable))
            EVENTS = []
            store.save(state, rewrite=rewrite, durable=durable)
            durable, force = durable or force or rewrite, False
            evs = EVENTS
            EVENTS = None
            acc_mid = ({last_durable, cur} if durable else {last_durable}) | (since | {cur} if TORN else set())
            for e in evs:
                cut_events.append((e, acc_mid, len(log)))
            last_save = cur
            if durable:
                last_durable = cur
                since = set()
            else:
                since = since | {cur}
            cut_events.append((image(), {last_durable} | (since if TORN else set()), len(log)))
        # crash
        if rng.random() < 0.5:
            # kill -9
            log.append(("kill9",))
            store = None
            store = RunStore(ROOT)
            try:
                st = store.load(RUN)
            except Exception as e:
                raise Fail(f"kill9 load error {e!r}", log) from None
            if dump(st) != last_save:
                raise Fail("kill9 loaded wrong state", log, dump(st)[:200], last_save[:200])
            state = st
            force = store._committed[RUN].unsure  # loaded from a header saved without fsync
        else:
            img, acc, upto = rng.choice(cut_events)
            log.append(("powercut_after_op", upto))
            store = None
            restore(tear(img, rng))
            store = RunStore(ROOT)
            try:
                st = store.load(RUN)
            except UserError as e:
                if None not in acc:
                    raise Fail(f"powercut load UserError {e!r}", log) from None
                state = RunState(run_id=RUN)
                last_save = last_durable = None
                since = set()
                continue
            except Exception as e:
                if None in acc:
                    state = RunState(run_id=RUN)
                    last_save = last_durable = None
                    since = set()
                    log.append(("err-no-durable", repr(e)[:100]))
                    shutil.rmtree(ROOT / RUN)
                    continue
                raise Fail(f"powercut load error {e!r}", log) from None
            if dump(st) not in acc:
                raise Fail(
                    "powercut loaded wrong state",
                    log,
                    json.loads(dump(st))["reason"],
                    [json.loads(a)["reason"] if a else a for a in acc],
                    len(st.messages),
                )
            state = st
            force = store._committed[RUN].unsure  # loaded from a header saved without fsync
            last_save = last_durable = dump(st)
            since = set()
    return log


if __name__ == "__main__":
    start, n = int(sys.argv[1]), int(sys.argv[2])
    fails = {}
    for seed in range(start, start + n):
        try:
            run_case(seed)
        except Fail as f:
            key = f.args[0][:60]
            if key not in fails:
                fails[key] = (seed, f.args)
                print("FAIL seed", seed, f.args[0][:300])
                print("  log:", f.args[1][-12:])
                if len(f.args) > 2:
                    print("  ", f.args[2:])
        except Exception:
            print("EXC seed", seed)
            traceback.print_exc()
            break
    print("done", n, "distinct failures", len(fails))
    shutil.rmtree(ROOT, ignore_errors=True)  # its scratch directory, one per invocation
