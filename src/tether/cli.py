"""The ``tether`` command.

Exit codes: 0 completed, 1 failed, 2 usage or configuration error, 3 max_turns_exceeded,
4 budget_exceeded, 5 interrupted for approval, 130 cancelled (Ctrl-C).
Progress goes to stderr, the answer to stdout; ``--json`` prints the RunResult as JSON instead.
Heavy modules are imported inside the commands so ``tether --help`` starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.harness.state import RunState
    from tether.status import RunResult

EXIT_CODES = {"completed": 0, "failed": 1, "max_turns_exceeded": 3, "budget_exceeded": 4}

DEFAULT_INSTRUCTIONS = (
    "You are a careful assistant working in a directory of files. Use the tools to look at the "
    "files before you answer, and say what you did."
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tether", description="A governed agent loop.")
    from tether import __version__

    p.add_argument("--version", action="version", version=f"tether {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def limits(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--max-turns", type=int, help="stop before model call N+1 (default 50)")
        sp.add_argument("--max-budget", type=float, metavar="USD", help="never spend more than this")
        sp.add_argument("--json", action="store_true", help="print the RunResult as JSON on stdout")

    r = sub.add_parser("run", help="run an agent on a prompt")
    r.add_argument("prompt")
    r.add_argument("--model", help="provider/model (default: $TETHER_MODEL or config.toml)")
    r.add_argument("--cwd", default=".", help="the directory the file tools work in")
    r.add_argument("--session", metavar="NAME", help="continue (or start) the conversation NAME")
    r.add_argument("--session-store", metavar="SPEC", help="jsonl[:DIR] (default), sqlite[:PATH] or memory")
    r.add_argument("--fallback", action="append", metavar="MODEL",
                   help="a model to switch to if the primary fails or stalls (repeatable)")
    r.add_argument("--first-token-timeout", type=float, metavar="S",
                   help="switch to the fallback when the first token takes longer than this")
    limits(r)

    rs = sub.add_parser("resume", help="continue a stopped run")
    rs.add_argument("run_id")
    decision = rs.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve the waiting call")
    decision.add_argument("--reject", metavar="REASON", help="decline the waiting call, saying why")
    running = rs.add_mutually_exclusive_group()
    running.add_argument("--wait", action="store_true",
                         help="first wait until a command left running by a crashed run has exited")
    running.add_argument("--kill", action="store_true",
                         help="first stop a command left running by a crashed run (and all it started)")
    limits(rs)

    ch = sub.add_parser("chat", help="an interactive chat in the terminal, kept in a session")
    ch.add_argument("--session", metavar="NAME", help="the conversation to continue (default: a new one)")
    ch.add_argument("--session-store", metavar="SPEC", help="jsonl[:DIR] (default), sqlite[:PATH] or memory")
    ch.add_argument("--model", help="provider/model (default: $TETHER_MODEL or config.toml)")
    ch.add_argument("--cwd", default=".", help="the directory the file tools work in")
    ch.add_argument("--max-turns", type=int, help="model calls per message (default 50)")
    ch.add_argument("--max-budget", type=float, metavar="USD", help="budget per message")

    ss = sub.add_parser("sessions", help="list, show, export or delete sessions")
    sss = ss.add_subparsers(dest="sessions_command", required=True)
    sss.add_parser("list", help="sessions with their message counts")
    for name, help_text in (("show", "print a session's transcript"), ("export", "print it as JSON lines"),
                            ("delete", "delete a session")):
        sp = sss.add_parser(name, help=help_text)
        sp.add_argument("session")
    ss.add_argument("--session-store", metavar="SPEC", help="jsonl[:DIR] (default), sqlite[:PATH] or memory")

    sub.add_parser("runs", help="list runs")
    sub.add_parser("models", help="list configured models and whether their credentials validate")
    au = sub.add_parser("auth", help="OAuth tokens for endpoints with auth = \"oauth\"")
    aus = au.add_subparsers(dest="auth_command", required=True)
    imp = aus.add_parser("import", help="store tokens for an endpoint (mode 0600 under $TETHER_HOME/auth)")
    imp.add_argument("endpoint")
    imp.add_argument("--refresh-token", required=True)
    imp.add_argument("--access-token", default="")
    imp.add_argument("--expires-in", type=float, default=0, help="seconds the access token stays valid")
    sh = sub.add_parser("show", help="show a run's transcript")
    sh.add_argument("run_id")
    tr = sub.add_parser("trace", help="print a run's trace (JSON lines)")
    tr.add_argument("run_id")

    sc = sub.add_parser("scripted", help="the scripted model's tools")
    scs = sc.add_subparsers(dest="scripted_command", required=True)
    serve = scs.add_parser("serve", help="serve the scripted model as an OpenAI-compatible API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--fault", action="append", default=[], metavar="FAULT",
                       help="fail the next request this way: 429[:retry_after=S], 500, 503, 529, 401, "
                            "overflow, cut, cut_after_text, stall:S, malformed, error_event (repeatable, in order)")
    serve.add_argument("--context-window", type=int, help="answer longer prompts with a context-length error")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from tether.errors import ConfigError, StoreError, UserError

    try:
        return int(_COMMANDS[args.command](args))
    except (ConfigError, UserError, StoreError) as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 2


def _settings() -> Settings:
    from tether.config import load_settings

    return load_settings()


def _store(settings: Settings) -> Any:
    from tether.harness.store import RunStore

    return RunStore(settings.home / "runs")


def _agent(state: RunState, settings: Settings) -> Any:
    from tether.harness.agent import Agent
    from tether.tools.builtin import builtin_tools, tool_settings

    cfg = state.config
    return Agent(
        model=cfg["model"],
        instructions=DEFAULT_INSTRUCTIONS,
        tools=builtin_tools(tool_settings(settings.tools)),
        cwd=cfg["cwd"],
        max_turns=cfg.get("max_turns", 50),
        max_budget_usd=cfg.get("max_budget_usd"),
        fallback_models=cfg.get("fallback_models", ()),
        first_token_timeout_s=cfg.get("first_token_timeout_s"),
        settings=settings,
    )


def _apply_limits(state: RunState, args: argparse.Namespace) -> None:
    if args.max_turns is not None:
        state.config["max_turns"] = args.max_turns
    if args.max_budget is not None:
        state.config["max_budget_usd"] = args.max_budget


def cmd_run(args: argparse.Namespace) -> int:
    from tether.config import resolve_model
    from tether.harness.state import RunState
    from tether.providers.registry import canonical_model

    settings = _settings()
    model = canonical_model(resolve_model(args.model, settings))
    cwd = Path(args.cwd).resolve()
    if not cwd.is_dir():
        raise _user_error(f"--cwd {args.cwd!r} is not a directory")
    fallbacks = [canonical_model(m) for m in (args.fallback or settings.fallback_models)]
    state = RunState(config={"model": model, "cwd": str(cwd), "max_turns": 50, "prompt": args.prompt[:200],
                             "fallback_models": fallbacks, "first_token_timeout_s": args.first_token_timeout,
                             "session_store": args.session_store},
                     session_id=args.session)
    _apply_limits(state, args)
    return _run_or_ask(state, args.prompt, args, settings)


def _run_or_ask(state: RunState, prompt: str | None, args: argparse.Namespace, settings: Settings) -> int:
    """At a terminal, approvals are asked for on the spot; in scripts (or with --json) the run
    stops with exit code 5 and waits for `tether resume`."""
    if sys.stdin.isatty() and sys.stderr.isatty() and not args.json:
        return _execute_asking(state, prompt, args, settings)
    return _execute(state, prompt, args, settings)


def _user_error(message: str) -> Exception:
    from tether.errors import UserError

    return UserError(message)


def cmd_resume(args: argparse.Namespace) -> int:
    from tether.harness.state import approve, reject

    settings = _settings()
    state = _store(settings).load(args.run_id)
    if state.status in ("completed", "failed"):
        raise _user_error(f"run {state.run_id} already ended ({state.status}); nothing to resume")
    _settle_left_running(state, args)
    if args.approve:
        approve(state)
    elif args.reject is not None:
        reject(state, args.reject)
    _apply_limits(state, args)
    return _run_or_ask(state, None, args, settings)


def _settle_left_running(state: RunState, args: argparse.Namespace) -> None:
    """--kill / --wait: deal with a command a crashed run left running before deciding about it."""
    import asyncio
    import signal as os_signal

    from tether.cancel import CancelSignal
    from tether.harness.state import kill_waiting_process, wait_for_waiting_process, waiting_process

    left = waiting_process(state)
    if args.kill:
        pid = kill_waiting_process(state)
        print(f"stopped process {pid} and everything it started" if pid else "no command was left running",
              file=sys.stderr)
    elif args.wait and left is not None:
        print(f"waiting for process {left.pid} to exit (Ctrl-C to stop waiting)...", file=sys.stderr, flush=True)

        async def wait() -> None:
            cancel = CancelSignal()
            asyncio.get_running_loop().add_signal_handler(os_signal.SIGINT, cancel.cancel, "Ctrl-C")
            await wait_for_waiting_process(state, cancel)

        from tether.errors import RunCancelled

        try:
            asyncio.run(wait())
        except RunCancelled:
            raise _user_error(f"stopped waiting; process {left.pid} is still running. Resume again later, "
                              "or with --kill to stop it") from None


def _execute(state: RunState, prompt: str | None, args: argparse.Namespace, settings: Settings) -> int:
    import asyncio
    import signal as os_signal

    from tether.cancel import CancelSignal
    from tether.harness.loop import run_stream
    from tether.tracing import JsonlTracer

    agent = _agent(state, settings)
    store = _store(settings)
    tracer = JsonlTracer(settings.home / "traces")
    printer = _Printer(quiet=args.json)
    sessions = _sessions(state.config.get("session_store"), settings) if state.session_id else None

    async def go() -> RunResult:
        cancel = CancelSignal()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(os_signal.SIGINT, cancel.cancel, "user pressed Ctrl-C")
        loop.add_signal_handler(os_signal.SIGTERM, cancel.cancel, "terminated (SIGTERM)")
        result = None
        async for event in run_stream(agent, prompt, state=state, store=store, tracer=tracer,
                                      signal=cancel, session=sessions):
            printer.show(event)
            if event.type == "done":
                result = event.result
        assert result is not None
        return result

    result = asyncio.run(go())
    if args.json:
        print(result.model_dump_json(indent=2))
    return _exit_code(result)


def _sessions(spec: str | None, settings: Settings) -> Any:
    import os

    from tether.sessions import open_session_store

    spec = spec or os.environ.get("TETHER_SESSION_STORE") or settings.session_store
    return open_session_store(spec, settings.home)


def _exit_code(result: RunResult) -> int:
    if result.status == "interrupted":
        return 130 if result.interruption is not None and result.interruption.type == "cancelled" else 5
    return EXIT_CODES.get(result.status, 1)


class _Printer:
    """Readable progress on stderr; the streamed answer on stdout."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.text_open = False

    def _err(self, line: str) -> None:
        if self.text_open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.text_open = False
        print(line, file=sys.stderr, flush=True)

    def show(self, event: Any) -> None:
        kind = event.type
        if kind == "text_delta":
            if not self.quiet:
                sys.stdout.write(event.text)
                sys.stdout.flush()
                self.text_open = True
        elif kind == "tool_start":
            self._err(f"-> {event.tool_name} {event.args}")
        elif kind == "tool_progress":
            self._err(f"   .. {event.label}")
        elif kind == "tool_result":
            self._err(f"   {'ok' if event.ok else 'error'} {event.tool_name} ({event.status}, {event.ms:.0f} ms)")
        elif kind == "retry":
            self._err(f"   retry {event.attempt}: {event.reason} (waiting {event.wait_s:.1f} s)")
        elif kind == "fallback":
            self._err(f"!! falling back from {event.from_model} to {event.to_model}: {event.reason}")
        elif kind == "approval_required":
            what = "outcome unknown after a crash" if event.reason == "outcome_unknown" else "needs approval"
            self._err(f"!! {event.tool_name} {event.args} {what}")
        elif kind == "done":
            self._done(event.result)

    def _done(self, r: RunResult) -> None:
        self._err(
            f"[{r.status}] {r.reason or ''} | turns {r.turns} | tokens {r.usage.total_tokens} | "
            f"${r.cost_usd:.6f} | {r.run_id}"
        )
        if r.cost_unknown_usd:
            self._err(f"   plus up to ${r.cost_unknown_usd:.6f} for requests lost when a process died")
        if r.status == "interrupted" and r.interruption is not None and r.interruption.type != "cancelled":
            self._err(f"   tether resume {r.run_id} --approve   |   tether resume {r.run_id} --reject REASON")
            if getattr(r.interruption, "still_running", False):
                self._err("   (its command is still running: add --wait to wait for it, or --kill to stop it)")
        elif r.status in ("max_turns_exceeded", "budget_exceeded"):
            self._err(f"   tether resume {r.run_id} --max-turns N / --max-budget USD to continue")


def cmd_runs(args: argparse.Namespace) -> int:
    rows = _store(_settings()).list()
    if not rows:
        print("no runs yet", file=sys.stderr)
        return 0
    print(f"{'run id':22} {'status':20} {'turns':>5} {'cost':>10}  model / prompt")
    for h in rows:
        cfg = h.get("config") or {}
        print(f"{h['run_id']:22} {h['status']:20} {h.get('turns', 0):>5} "
              f"${h.get('cost_usd', 0):>9.6f}  {h.get('model') or ''}  {cfg.get('prompt', '')[:50]!r}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:

    state = _store(_settings()).load(args.run_id)
    print(f"run {state.run_id}  status={state.status}  turns={state.turns}  cost=${state.cost_usd:.6f}")
    if state.reason:
        print(f"reason: {state.reason}")
    _print_transcript(state.messages)
    return 0


def _print_transcript(messages: Any) -> None:
    from tether.messages import AssistantMessage, ToolMessage

    for m in messages:
        if isinstance(m, AssistantMessage):
            calls = " ".join(f"{c.name}({c.arguments})#{c.id}" for c in m.tool_calls)
            print(f"assistant: {m.text} {calls}".rstrip())
        elif isinstance(m, ToolMessage):
            print(f"tool[{m.call_id} {m.name} {m.status}]: {m.text[:300]}")
        else:
            print(f"user: {''.join(getattr(p, 'text', '') for p in m.content)}")


def cmd_trace(args: argparse.Namespace) -> int:
    settings = _settings()
    path = settings.home / "traces" / f"{args.run_id}.jsonl"
    if not path.exists():
        raise _user_error(f"no trace for {args.run_id!r} at {path}")
    sys.stdout.write(path.read_text(encoding="utf-8"))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    import time

    from tether.config import resolve_model
    from tether.providers.registry import canonical_model

    settings = _settings()
    model = canonical_model(resolve_model(args.model, settings))
    cwd = Path(args.cwd).resolve()
    session = args.session or time.strftime("chat-%Y%m%d-%H%M%S")
    print(f"tether chat: {model} in {cwd}, session {session!r} (Ctrl-C stops a reply, Ctrl-D leaves)",
          file=sys.stderr)
    args.json = False
    try:
        return _chat_loop(args, settings, model, cwd, session)
    except KeyboardInterrupt:  # Ctrl-C at the prompt leaves; during a reply it only stops the reply
        print(file=sys.stderr)
        return 130


def _chat_loop(args: argparse.Namespace, settings: Settings, model: str, cwd: Path, session: str) -> int:
    from tether.harness.state import RunState

    while True:
        line = _ask("you> ")
        if line is None or line.strip() in ("/exit", "/quit"):
            return 0
        if not line.strip():
            continue
        state = RunState(session_id=session, config={
            "model": model, "cwd": str(cwd), "max_turns": args.max_turns or 50, "max_budget_usd": args.max_budget,
            "session_store": args.session_store, "prompt": line[:200],
            "fallback_models": list(settings.fallback_models)})
        _execute_asking(state, line, args, settings)


def _execute_asking(state: RunState, prompt: str | None, args: argparse.Namespace, settings: Settings) -> int:
    """Run, and whenever the run stops for a person, ask y/n on the terminal and go on."""
    import json

    from tether.harness.state import approve, reject

    while True:
        code = _execute(state, prompt, args, settings)
        prompt = None
        waiting = state.interruption
        if code != 5 or waiting is None or waiting.type not in ("approval", "outcome_unknown"):
            return code
        answer = _ask(f"Allow {waiting.tool_name} {json.dumps(waiting.args)}? [y/N] ")
        if answer is None:  # no one to ask: leave the run waiting, resumable
            return code
        if answer.strip().lower() in ("y", "yes"):
            approve(state)
        else:
            reject(state, (_ask("reason (optional): ") or "").strip() or None)


def _ask(prompt: str) -> str | None:
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


def cmd_sessions(args: argparse.Namespace) -> int:
    from tether.sessions import export_jsonl

    settings = _settings()
    store = _sessions(args.session_store, settings)
    command = args.sessions_command
    if command == "list":
        rows = store.list()
        if not rows:
            print("no sessions yet", file=sys.stderr)
        for info in rows:
            print(f"{info.session_id:30} {info.messages:>6} messages")
        return 0
    if command == "delete":
        store.delete(args.session)
        print(f"deleted session {args.session}", file=sys.stderr)
        return 0
    messages = store.load(args.session)
    if not messages:
        raise _user_error(f"no session {args.session!r} (or it is empty)")
    if command == "export":
        sys.stdout.write(export_jsonl(messages))
    else:
        _print_transcript(messages)
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    import asyncio

    from tether.errors import TetherError
    from tether.providers.registry import configured_models, resolve_provider

    settings = _settings()

    async def check(model: str) -> str:
        try:
            resolved = resolve_provider(model, settings)
        except TetherError as exc:
            return f"not configured: {str(exc).splitlines()[0]}"
        try:
            await resolved.provider.validate_auth()
            return "ok"
        except TetherError as exc:
            return f"auth failed: {str(exc).splitlines()[0]}"
        finally:
            await resolved.provider.aclose()

    async def run_checks() -> list[tuple[str, str]]:
        models = configured_models(settings)
        by_provider: dict[str, str] = {}
        rows = []
        for model in models:
            provider = model.split("/", 1)[0]
            if provider not in by_provider:  # one credential check per provider
                by_provider[provider] = await check(model)
            rows.append((model, by_provider[provider]))
        return rows

    for model, status in asyncio.run(run_checks()):
        print(f"{model:40} {status}")
    return 0


def cmd_auth(args: argparse.Namespace) -> int:
    import time

    from tether.providers.auth import save_oauth_tokens

    settings = _settings()
    if args.endpoint not in settings.endpoints:
        raise _user_error(f"no [endpoints.{args.endpoint}] in {settings.home / 'config.toml'}")
    path = settings.home / "auth" / f"{args.endpoint}.json"
    save_oauth_tokens(path, {"access_token": args.access_token, "refresh_token": args.refresh_token,
                             "expires_at": time.time() + args.expires_in if args.access_token else 0})
    print(f"stored tokens for {args.endpoint} in {path} (mode 0600)", file=sys.stderr)
    return 0


def cmd_scripted(args: argparse.Namespace) -> int:
    from tether.testing.server import ScriptedServer

    server = ScriptedServer(args.host, args.port, faults=args.fault, context_window=args.context_window)
    print(f"scripted OpenAI-compatible server on {server.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


_COMMANDS = {
    "run": cmd_run,
    "resume": cmd_resume,
    "runs": cmd_runs,
    "chat": cmd_chat,
    "sessions": cmd_sessions,
    "models": cmd_models,
    "auth": cmd_auth,
    "show": cmd_show,
    "trace": cmd_trace,
    "scripted": cmd_scripted,
}

if __name__ == "__main__":
    sys.exit(main())
