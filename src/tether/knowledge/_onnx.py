"""A small ONNX interpreter in numpy, for the local embedder's queries: a search that embeds one
short text need not import onnxruntime (about 0.3 s and 200 MB before the first vector).

It reads the model file's protocol buffer itself (the few fields a graph needs), keeps the weights
as stored (int8 stays int8), and runs the graph's nodes in order, each as the numpy expression of
its ONNX operator. Only the operators all-MiniLM-L6-v2's int8 export uses are implemented; any other
is a :class:`UnsupportedModel`, and the embedder then uses onnxruntime. Its vectors agree with
onnxruntime's to float32 rounding (tests/knowledge/test_embed.py checks the cosine).

A loaded graph (its int8 weights already dequantized) can be kept in one file with :func:`save`
and mapped back with :func:`read`, which takes about a millisecond where :func:`load` takes about
80 (reading, hashing and dequantizing the model). The file is a safetensors file: an 8-byte length,
a JSON header naming each weight's dtype, shape and byte range, then the weights; the nodes travel
in the header's ``__metadata__``. Nothing in it is executed (no pickle), and a file that does not
check out is ignored.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "Graph", "UnsupportedModel", "load", "read", "save"]

FORMAT = "tether-onnx-graph/1"  # bumped whenever what load() makes of a model file changes


class UnsupportedModel(Exception):
    """The model uses something this interpreter does not implement."""


# --- the protocol buffer wire format, as far as an ONNX graph needs it ---------------------------


def _varint(b: memoryview, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if c < 0x80:
            return result, i
        shift += 7


def _fields(b: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message: an int for varints, bytes otherwise."""
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 1:
            value, i = b[i : i + 8], i + 8
        elif wire == 2:
            length, i = _varint(b, i)
            value, i = b[i : i + length], i + length
        elif wire == 5:
            value, i = b[i : i + 4], i + 4
        else:
            raise UnsupportedModel(f"protocol buffer wire type {wire}")
        yield number, wire, value


def _packed_ints(value: Any, wire: int) -> list[int]:
    if wire == 0:
        return [_signed(value)]
    out, i, b = [], 0, value
    while i < len(b):
        v, i = _varint(b, i)
        out.append(_signed(v))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# TensorProto.DataType -> numpy dtype name
_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


def _tensor(b: memoryview) -> tuple[str, Any]:
    import numpy as np

    dims: list[int] = []
    dtype, name, raw = 1, "", None
    floats: list[float] = []
    ints: list[int] = []
    for number, wire, value in _fields(b):
        if number == 1:
            dims += _packed_ints(value, wire)
        elif number == 2:
            dtype = value
        elif number == 8:
            name = bytes(value).decode()
        elif number == 9:
            raw = value  # a view of the file's bytes: no copy until a weight is computed from it
        elif number == 4:
            floats += list(np.frombuffer(bytes(value), dtype="<f4")) if wire == 2 else [_f32(value)]
        elif number in (5, 7):
            ints += _packed_ints(value, wire)
        elif number == 14:
            raise UnsupportedModel(f"tensor {name} keeps its data in an external file")
    if dtype not in _DTYPES:
        raise UnsupportedModel(f"tensor data type {dtype}")
    kind = np.dtype(_DTYPES[dtype]).newbyteorder("<")
    if raw is not None:
        array = np.frombuffer(raw, dtype=kind)
    elif floats:
        array = np.asarray(floats, dtype=kind)
    else:
        array = np.asarray(ints, dtype=kind)
    return name, array.reshape(dims) if dims else array.reshape(())


def _f32(value: Any) -> float:
    import struct

    return float(struct.unpack("<f", bytes(value))[0])


@dataclass
class Node:
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


def _node(b: memoryview) -> Node:
    node = Node("", [], [])
    for number, _, value in _fields(b):
        if number == 1:
            node.inputs.append(bytes(value).decode())
        elif number == 2:
            node.outputs.append(bytes(value).decode())
        elif number == 4:
            node.op = bytes(value).decode()
        elif number == 7 and bytes(value) not in (b"", b"ai.onnx"):
            raise UnsupportedModel(f"operator domain {bytes(value).decode()}")
        elif number == 5:
            name, attr = _attribute(value)
            node.attrs[name] = attr
    return node


def _attribute(b: memoryview) -> tuple[str, Any]:
    name, ints = "", []
    found: Any = None
    for number, wire, value in _fields(b):
        if number == 1:
            name = bytes(value).decode()
        elif number == 2:
            found = _f32(value)
        elif number == 3:
            found = _signed(value)
        elif number == 4:
            found = bytes(value).decode()
        elif number == 8:
            ints += _packed_ints(value, wire)
    return name, ints if ints else found


@dataclass
class Graph:
    """A model's nodes (in the file's order, which ONNX requires to be topological), its weights,
    and its inputs and outputs."""

    nodes: list[Node]
    weights: dict[str, Any]
    inputs: list[str]
    outputs: list[str]
    meta: dict[str, str] = field(default_factory=dict)  # a kept copy's metadata, as read()

    def run(self, feed: dict[str, Any]) -> list[Any]:
        values: dict[str, Any] = {**self.weights, **feed, "": None}
        for node in self.nodes:
            results = _OPS[node.op](node, *[values[name] for name in node.inputs])
            for name, value in zip(node.outputs, results, strict=False):
                values[name] = value
        return [values[name] for name in self.outputs]

    def fold(self, limit: int = 4_000_000) -> None:
        """Compute once what depends on weights alone (the int8 weights' dequantization): each
        such node's result becomes a weight, and a weight is dropped as soon as nothing left
        reads it. A table of more than ``limit`` elements that is only gathered from (the word
        embeddings) is dequantized per gathered row at each run instead (:func:`_rows_first`)."""
        np = _np()
        self.nodes = _rows_first(self.nodes, self.weights)
        uses: dict[str, int] = {}
        for node in self.nodes:
            for name in node.inputs:
                uses[name] = uses.get(name, 0) + 1
        kept: list[Node] = []
        for node in self.nodes:
            constant = node.inputs and all(name in self.weights or name == "" for name in node.inputs)
            if not constant:
                kept.append(node)
                continue
            args = [self.weights.get(name) for name in node.inputs]
            if int(np.prod(np.broadcast_shapes(*[a.shape for a in args if a is not None]))) > limit:
                kept.append(node)
                continue
            for name, value in zip(node.outputs, _OPS[node.op](node, *args), strict=False):
                self.weights[name] = value
            for name in node.inputs:
                uses[name] -= 1
                if uses[name] == 0 and name not in self.outputs:
                    self.weights.pop(name, None)
        self.nodes = kept
        used = {name for node in self.nodes for name in node.inputs} | set(self.outputs)
        # A weight still backed by the file's bytes gets its own copy, so the bytes can go.
        self.weights = {
            name: value if value.flags.owndata else np.array(value)
            for name, value in self.weights.items()
            if name in used
        }


def _rows_first(nodes: list[Node], weights: dict[str, Any]) -> list[Node]:
    """``Gather(Mul(Cast(W), scale), ids)`` of a large table as ``Mul(Cast(Gather(W, ids)),
    Gather(scale, ids))``: the same rows, dequantized after they are picked."""
    made = {node.outputs[0]: node for node in nodes}
    out: list[Node] = []
    dropped: set[int] = set()
    for node in nodes:
        mul = made.get(node.inputs[0]) if node.op == "Gather" and node.attrs.get("axis", 0) == 0 else None
        cast = made.get(mul.inputs[0]) if mul is not None and mul.op == "Mul" else None
        if mul is None or cast is None or cast.op != "Cast" or cast.inputs[0] not in weights:
            out.append(node)
            continue
        scale = mul.inputs[1]
        if scale not in weights or weights[scale].shape[:1] != weights[cast.inputs[0]].shape[:1]:
            out.append(node)
            continue
        rows, scales, cast_rows = (f"{node.outputs[0]}/{part}" for part in ("rows", "scales", "cast"))
        ids = node.inputs[1]
        out += [
            Node("Gather", [cast.inputs[0], ids], [rows], {"axis": 0}),
            Node("Gather", [scale, ids], [scales], {"axis": 0}),
            Node("Cast", [rows], [cast_rows], dict(cast.attrs)),
            Node("Mul", [cast_rows, scales], list(node.outputs)),
        ]
        dropped |= {id(mul), id(cast)}
    return [node for node in out if id(node) not in dropped]


def load(path: Path | str, data: bytes | None = None) -> Graph:
    """The graph in the ONNX file at ``path`` (or its bytes, ``data``), checked for operators this
    interpreter runs, with what depends on its weights alone computed once."""
    whole = memoryview(data if data is not None else Path(path).read_bytes())
    graph = next((value for number, _, value in _fields(whole) if number == 7), None)
    if graph is None:
        raise UnsupportedModel("no graph in the model file")
    nodes: list[Node] = []
    weights: dict[str, Any] = {}
    inputs: list[str] = []
    outputs: list[str] = []
    for number, _, value in _fields(graph):
        if number == 1:
            nodes.append(_node(value))
        elif number == 5:
            name, array = _tensor(value)
            weights[name] = array
        elif number in (11, 12):
            name = next((bytes(v).decode() for n, _, v in _fields(value) if n == 1), "")
            (inputs if number == 11 else outputs).append(name)
    missing = sorted({n.op for n in nodes} - set(_OPS))
    if missing:
        raise UnsupportedModel(f"operators {', '.join(missing)}")
    graph_ = Graph(nodes, weights, [i for i in inputs if i not in weights], outputs)
    graph_.fold()
    return graph_


# --- a loaded graph, kept in a file ---------------------------------------------------------------

# safetensors' names for the dtypes a graph's weights have, widest first: written in this order
# after a header padded to 8 bytes, every weight starts at a multiple of its own size.
_STORED = {
    "float64": "F64",
    "int64": "I64",
    "float32": "F32",
    "int32": "I32",
    "uint8": "U8",
    "int8": "I8",
    "bool": "BOOL",
}
_MAX_HEADER = 1 << 24
_MAX_DIMS = 64  # numpy's own limit


def save(graph: Graph, path: Path, stamp: dict[str, str], extra: dict[str, str] | None = None) -> bool:
    """Write ``graph`` to ``path`` with ``stamp`` in its metadata (what :func:`read` must find
    there to trust it) and ``extra`` (what the caller checks itself, in ``Graph.meta``): to a
    temporary file in the same folder, flushed to the disk, then renamed over ``path``, so a reader
    sees the whole file or none. False when it could not be written (a read-only home, a full
    disk, a weight of another dtype): the caller goes on without it."""
    import tempfile

    np = _np()
    order = {code: rank for rank, code in enumerate(_STORED)}
    named = sorted(graph.weights.items(), key=lambda item: order.get(str(item[1].dtype), len(order)))
    if any(str(w.dtype) not in _STORED for _, w in named):
        return False
    meta = {
        **(extra or {}),
        **stamp,
        "format": FORMAT,
        "nodes": json.dumps([asdict(n) for n in graph.nodes]),
        "inputs": json.dumps(graph.inputs),
        "outputs": json.dumps(graph.outputs),
    }
    header: dict[str, Any] = {"__metadata__": meta}
    offset = 0
    for name, w in named:
        ends = [offset, offset + w.nbytes]
        header[name] = {"dtype": _STORED[str(w.dtype)], "shape": list(w.shape), "data_offsets": ends}
        offset += w.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    fd, tmp = -1, ""
    try:
        from tether.fileio import private_dir

        private_dir(path.parent)  # 0700, as everything tether keeps under its home
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            fd = -1
            out.write(len(text).to_bytes(8, "little") + text)
            for _, w in named:
                out.write(np.ascontiguousarray(w, dtype=w.dtype.newbyteorder("<")).tobytes())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        tmp = ""
        return True
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            Path(tmp).unlink(missing_ok=True)


def read(path: Path, stamp: dict[str, str]) -> Graph | None:
    """The graph :func:`save` wrote to ``path``, its weights mapped from the file (read-only, shared
    with every process that maps it); None when there is no such file, when its metadata does not
    hold ``stamp`` (another model file, another version of this module), or when anything in it
    does not check out."""
    np = _np()
    try:
        # Not blocking: a FIFO planted at the name must not hang the search; only a regular file is read.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        with open(fd, "rb") as f:
            size = info.st_size
            length = int.from_bytes(f.read(8), "little")
            if not 0 < length <= min(size - 8, _MAX_HEADER):
                return None
            header = json.loads(f.read(length))
            meta = header.pop("__metadata__")
            if meta.get("format") != FORMAT or any(meta.get(k) != v for k, v in stamp.items()):
                return None
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size > 8 + length else None
        start, dtypes = 8 + length, {code: name for name, code in _STORED.items()}
        weights: dict[str, Any] = {}
        for name, entry in header.items():
            dtype = np.dtype(dtypes[entry["dtype"]]).newbyteorder("<")
            shape, (begin, end) = entry["shape"], entry["data_offsets"]
            if not isinstance(shape, list) or len(shape) > _MAX_DIMS:
                return None
            if not all(type(x) is int and x >= 0 for x in (*shape, begin, end)):
                return None
            count = math.prod(shape)
            if not begin <= end <= size - start or end - begin != count * dtype.itemsize:
                return None
            if count == 0:
                weights[name] = np.zeros(shape, dtype)
                continue
            weights[name] = np.frombuffer(mapped, dtype, count, start + begin).reshape(shape)
        nodes = [Node(**n) for n in json.loads(meta["nodes"])]
        graph = Graph(nodes, weights, json.loads(meta["inputs"]), json.loads(meta["outputs"]), meta)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return graph if _well_formed(graph) else None


def _well_formed(graph: Graph) -> bool:
    """Every node an operator this interpreter runs, reading only what exists before it or is
    fed: a file that passes calls nothing but these operators. Whether it computes the model is
    for the caller to check (the embedder runs a known sentence through it)."""
    if not (_names(graph.inputs) and _names(graph.outputs)):
        return False
    known = {*graph.weights, *graph.inputs, ""}
    for node in graph.nodes:
        if not (isinstance(node.op, str) and node.op in _OPS and _names(node.inputs) and _names(node.outputs)):
            return False
        if not set(node.inputs) <= known or not isinstance(node.attrs, dict):
            return False
        for key, value in node.attrs.items():
            listed = isinstance(value, list) and all(type(v) is int for v in value)
            if not isinstance(key, str) or not (listed or type(value) in (int, float, str)):
                return False
        known.update(node.outputs)
    return set(graph.outputs) <= known


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


# --- the operators -------------------------------------------------------------------------------


def _np() -> Any:
    import numpy as np

    return np


def _erf(x: Any) -> Any:
    """erf with a relative error under 1.2e-7 (the Chebyshev fit of Numerical Recipes' erfc), in
    float64 and returned in the input's type."""
    np = _np()
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (
        -z * z
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))
                    )
                )
            )
        )
    )
    erfc = t * np.exp(poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(x.dtype)


def _layer_norm(node: Node, x: Any, scale: Any, bias: Any = None) -> list[Any]:
    np = _np()
    axis = node.attrs.get("axis", -1)
    eps = node.attrs.get("epsilon", 1e-5)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.float32(eps)) * scale
    return [(y + bias if bias is not None else y).astype(x.dtype)]


def _slice(node: Node, x: Any, starts: Any, ends: Any, axes: Any = None, steps: Any = None) -> list[Any]:
    index = [slice(None)] * x.ndim
    axes_list = list(axes) if axes is not None else list(range(len(starts)))
    steps_list = list(steps) if steps is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes_list, steps_list, strict=True):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return [x[tuple(index)]]


def _reshape(node: Node, x: Any, shape: Any) -> list[Any]:
    dims = [x.shape[i] if d == 0 and not node.attrs.get("allowzero") else int(d) for i, d in enumerate(shape)]
    return [x.reshape(dims)]


def _gather_nd(node: Node, data: Any, indices: Any) -> list[Any]:
    np = _np()
    b = node.attrs.get("batch_dims", 0)
    if b == 0:
        return [data[tuple(np.moveaxis(indices, -1, 0))]]
    if b != 1:
        raise UnsupportedModel("GatherND with batch_dims above 1")
    return [np.stack([data[i][tuple(np.moveaxis(indices[i], -1, 0))] for i in range(data.shape[0])])]


def _softmax(node: Node, x: Any) -> list[Any]:
    np = _np()
    axis = node.attrs.get("axis", -1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


def _shape(node: Node, x: Any) -> list[Any]:
    np = _np()
    dims = np.asarray(x.shape, dtype=np.int64)
    return [dims[node.attrs.get("start", 0) : node.attrs.get("end", len(dims))]]


def _cast(node: Node, x: Any) -> list[Any]:
    to = node.attrs["to"]
    if to not in _DTYPES:
        raise UnsupportedModel(f"Cast to data type {to}")
    return [_np().asarray(x).astype(_DTYPES[to])]


def _squeeze(node: Node, x: Any, axes: Any = None) -> list[Any]:
    np = _np()
    return [np.squeeze(x, axis=tuple(int(a) for a in axes)) if axes is not None else np.squeeze(x)]


def _unsqueeze(node: Node, x: Any, axes: Any) -> list[Any]:
    np = _np()
    out = x
    for a in sorted(int(a) % (x.ndim + len(axes)) for a in axes):
        out = np.expand_dims(out, a)
    return [out]


def _binary(f: Callable[[Any, Any], Any]) -> Callable[..., list[Any]]:
    return lambda node, a, b: [f(a, b)]


_OPS: dict[str, Callable[..., list[Any]]] = {
    "Add": _binary(lambda a, b: a + b),
    "Mul": _binary(lambda a, b: a * b),
    "Div": lambda node, a, b: [(a / b).astype(a.dtype) if a.dtype.kind == "f" else a // b],
    "MatMul": _binary(lambda a, b: a @ b),
    "And": _binary(lambda a, b: _np().logical_and(a, b)),
    "GreaterOrEqual": _binary(lambda a, b: a >= b),
    "Max": lambda node, *xs: [_np().maximum.reduce(_np().broadcast_arrays(*xs))],
    "Where": lambda node, c, a, b: [_np().where(c, a, b)],
    "IsNaN": lambda node, x: [_np().isnan(x)],
    "Erf": lambda node, x: [_erf(x)],
    "Cast": _cast,
    "Shape": _shape,
    "Reshape": _reshape,
    "Transpose": lambda node, x: [_np().transpose(x, node.attrs.get("perm"))],
    "Slice": _slice,
    "Concat": lambda node, *xs: [_np().concatenate(xs, axis=node.attrs["axis"])],
    "Gather": lambda node, x, i: [_np().take(x, i, axis=node.attrs.get("axis", 0))],
    "GatherND": _gather_nd,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Expand": lambda node, x, shape: [x * _np().ones(tuple(int(d) for d in shape), dtype=x.dtype)],
    "Range": lambda node, start, limit, delta: [_np().arange(start, limit, delta, dtype=start.dtype)],
    "Softmax": _softmax,
    "LayerNormalization": _layer_norm,
}
