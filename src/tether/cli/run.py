"""``tether run`` and ``tether resume``: build the agent, drive the run, print it as it goes, and
ask a person at the terminal when a call needs a decision.

At a terminal the question comes first; the summary line and the resume hint are printed only when
the run really stops (nobody could answer, or it ended). Progress goes to stderr, the streamed
answer to stdout; ``--json`` prints the RunResult instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.common import (
    add_session_store_option,
    directory,
    exit_code,
    load_run,
    open_sessions,
    positive_float,
    positive_int,
    run_store,
    session_name,
    stops_in_words,
    text,
    usage_error,
)
from tether.cli.common import settings as load_settings
from tether.cli.display import args_json, shown
from tether.cli.kb import kb_name
from tether.cli.memory import add_memory_options, memory_override
from tether.cli.signals import (  # the names from before tether.cli.signals, still here
    HUNG_UP,
    TERMINATED,
    Terminated,
    _hangup,
    _on_hangup,
    ask,
    hold_sigterm,
    run_stoppable,
    sigterm_held,
    terminated,
)
from tether.cli.skills import add_skills_options, skills_override

if TYPE_CHECKING:
    from tether.assembly import Overrides, Recipe
    from tether.cancel import CancelSignal
    from tether.config import Settings
    from tether.harness.agent import Agent
    from tether.harness.state import RunState
    from tether.status import ApprovalInterruption, OutcomeUnknownInterruption, RunResult

__all__ = [
    "HUNG_UP",
    "STDOUT_FAILED",
    "TERMINATED",
    "Terminated",
    "add_agent_options",
    "add_parsers",
    "ask",
    "at_terminal",
    "check_home",
    "drive",
    "hold_sigterm",
    "is_utf8",
    "overrides",
    "read_prompt",
    "sigterm_held",
    "terminated",
]

# The reason a run stopped by stdout's reader leaving (`tether run ... | head -1`), with the shell's code for SIGPIPE.
READER_LEFT = "stdout was closed by its reader (a pipe such as | head)"
READER_GONE = 141
# ... by stdout that cannot be written (a file on a full disk); the command ends with exit code 1.
STDOUT_FAILED = "stdout could not be written"

DEFAULT_MAX_TURNS = 50  # tether.assembly.DEFAULT_MAX_TURNS, kept here for the help text (no import)

PROMPT_HELP = """\
The prompt: PROMPT as given; "-" reads it from standard input, and so does a pipe when PROMPT is
left out (echo "..." | tether run); "@FILE" reads it from FILE; "@@..." sends the text with one
leading "@" removed (for a prompt that really starts with "@"). An empty or blank prompt is refused.
"""

RESUME_HELP = """\
--max-turns N on resume means N MORE turns from where the run stopped (a run stopped at its turn
limit needs it to go on). --max-budget USD is the run's new total budget: what it already spent
counts against it. --max-run-tokens N is the run's new token limit, likewise a total: the tokens
it already used count against it.
"""


def add_parsers(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="run an agent on a prompt",
        description=PROMPT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument(
        "prompt",
        nargs="?",
        metavar="PROMPT",
        help='the request; "-" or a pipe: standard input; @FILE: a file; @@text: "@text"',
    )
    add_agent_options(r)
    r.add_argument("--session", metavar="NAME", type=session_name, help="continue (or start) the conversation NAME")
    add_session_store_option(r)
    r.add_argument(
        "--fallback",
        action="append",
        metavar="MODEL",
        help="a model to switch to if the primary fails or stalls (repeatable)",
    )
    r.add_argument(
        "--first-token-timeout",
        type=positive_float,
        metavar="S",
        help="switch to the fallback when the first token takes longer than S seconds (> 0)",
    )
    r.add_argument("--json", action="store_true", help="print the RunResult as JSON on stdout")
    r.add_argument(
        "--output-schema",
        metavar="FILE",
        help="a JSON Schema (of an object) the answer must match; the validated JSON is printed on stdout",
    )
    r.set_defaults(handler=cmd_run)
    _add_resume_parser(sub)


def _add_resume_parser(sub: Any) -> None:
    rs = sub.add_parser(
        "resume",
        help="continue a stopped run",
        description=RESUME_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rs.add_argument("run_id", metavar="RUN_ID", help="the run; last: the newest run that can be resumed")
    decision = rs.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve the waiting call")
    decision.add_argument("--reject", metavar="REASON", help="decline the waiting call, saying why")
    rs.add_argument(
        "--reason",
        type=text,
        metavar="TEXT",
        help="with --approve: the person's words, which the model reads before the call's result",
    )
    rs.add_argument(
        "--call",
        type=text,
        metavar="CALL_ID",
        help="with --approve or --reject: the call decided (tether show names it); refused, nothing "
        "run, when the run does not wait for it (default: the call the run stopped for)",
    )
    running = rs.add_mutually_exclusive_group()
    running.add_argument(
        "--wait", action="store_true", help="first wait until a command left running by a crashed run has exited"
    )
    running.add_argument(
        "--kill", action="store_true", help="first stop a command left running by a crashed run (and all it started)"
    )
    rs.add_argument(
        "--max-turns", type=positive_int, metavar="N", help="allow N more turns from where the run stopped (N >= 1)"
    )
    rs.add_argument(
        "--max-budget",
        type=positive_float,
        metavar="USD",
        help="the run's new total budget, spending so far included (> 0)",
    )
    rs.add_argument(
        "--max-run-tokens",
        type=positive_int,
        metavar="N",
        help="the run's new token limit, the tokens it used so far included (N >= 1)",
    )
    rs.add_argument("--json", action="store_true", help="print the RunResult as JSON on stdout")
    rs.set_defaults(handler=cmd_resume)


def add_agent_options(parser: argparse.ArgumentParser, *, per: str = "") -> None:
    """``--agent NAME`` and the flags that override its definition (``tether run`` and ``chat``)."""
    parser.add_argument(
        "--agent", metavar="NAME", type=text, help="the agent [agents.NAME] in config.toml (its flags override it)"
    )
    parser.add_argument("--model", help="provider/model (default: the agent's, $TETHER_MODEL or config.toml)")
    parser.add_argument(
        "--cwd", type=directory, metavar="DIR", help="the directory the file tools work in (default: .)"
    )
    parser.add_argument(
        "--max-turns",
        type=positive_int,
        metavar="N",
        help=f"stop before model call N+1{per} (N >= 1, default: the agent's, else {DEFAULT_MAX_TURNS})",
    )
    parser.add_argument(
        "--max-budget", type=positive_float, metavar="USD", help=f"never spend more than this{per} (> 0)"
    )
    parser.add_argument(
        "--max-run-tokens",
        type=positive_int,
        metavar="N",
        help=f"never use more than N tokens{per}, prompt and output of every model call (N >= 1)",
    )
    add_memory_options(parser)
    add_skills_options(parser)
    parser.add_argument(
        "--kb",
        action="append",
        type=kb_name,
        default=[],
        metavar="NAME",
        help="give the agent this knowledge base's tools (search_kb, lookup_exact, entity_chunks; repeatable)",
    )
    parser.add_argument(
        "--mcp",
        action="append",
        type=text,
        default=[],
        metavar="NAME",
        help="give the agent the tools of the MCP server [mcp.NAME] in config.toml (repeatable; "
        "all: every enabled server)",
    )


def overrides(args: argparse.Namespace, **more: Any) -> Overrides:
    """What the agent flags change in the agent's definition."""
    from tether.assembly import Overrides

    return Overrides(
        model=args.model,
        cwd=str(args.cwd) if args.cwd else None,
        max_turns=args.max_turns,
        max_budget_usd=args.max_budget,
        max_run_tokens=args.max_run_tokens,
        memory=memory_override(args),
        skills=skills_override(args),
        kb=args.kb,
        mcp=args.mcp,
        **more,
    )


# --- the prompt -------------------------------------------------------------------------------


def read_prompt(arg: str | None) -> str:
    """The prompt from the argument, standard input or a file (see PROMPT_HELP)."""
    stdin = sys.stdin
    if arg is None:
        if stdin is None or stdin.isatty():
            raise usage_error(
                'give a prompt: tether run "..." (or - to read it from standard input, @FILE to read it from a file)'
            )
        arg = "-"
    if arg == "-":
        source = "standard input"
        try:
            text = stdin.buffer.read().decode("utf-8") if stdin is not None else ""
        except UnicodeDecodeError:
            raise usage_error("the prompt on standard input is not UTF-8 text") from None
    elif arg.startswith("@@"):
        source, text = "the argument", arg[1:]
    elif arg.startswith("@"):
        source, text = arg[1:], _read_file(arg[1:])
    else:
        source, text = "the argument", arg
    if not is_utf8(text):  # bytes of another encoding in the argument (Python keeps them as surrogates)
        raise usage_error(
            f"the prompt from {source} is not UTF-8 text (a byte of another encoding, such as Latin-1's é); "
            "convert it (iconv -f LATIN1 -t UTF-8) and run again"
        )
    text = text.rstrip("\r\n")
    if not text.strip():
        raise usage_error(f"the prompt from {source} is empty; say what the agent should do")
    return text


def is_utf8(text: str) -> bool:
    """Whether ``text`` is text: an argument or a line of stdin holding bytes that are not UTF-8 is
    read with each such byte as a lone surrogate, which the model would get as "\ufffd" and a run's
    saved prompt would write back as the raw byte (`tether runs --json` no longer UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_file(name: str) -> str:
    if not name:
        raise usage_error('"@" needs a file name (@FILE reads the prompt from FILE; @@text sends "@text")')
    try:
        return Path(name).expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise usage_error(f"cannot read the prompt from {name}: it is not UTF-8 text") from None
    except OSError as exc:
        raise usage_error(
            f"cannot read the prompt from {name}: {exc.strerror or exc} "
            f'(to send a prompt that starts with "@", write @@{name})'
        ) from None


# --- the commands -----------------------------------------------------------------------------


@stops_in_words  # until the run starts (a prompt still read from a pipe); the run stops itself
def cmd_run(args: argparse.Namespace) -> int:
    from tether.assembly import load_output_schema, plan
    from tether.harness.state import RunState

    if args.session_store and not args.session:
        raise usage_error("--session-store needs --session NAME (it says where that session is kept)")
    prompt = read_prompt(args.prompt)
    schema = load_output_schema(args.output_schema, what="--output-schema") if args.output_schema else None
    settings = load_settings()
    fallbacks = {"fallback_models": args.fallback} if args.fallback else {}
    recipe = plan(
        settings,
        args.agent,
        overrides(args, output_schema=schema, first_token_timeout_s=args.first_token_timeout, **fallbacks),
    )
    if args.session:
        open_sessions(args.session_store, settings)  # a store that cannot open is refused before the run
    config = {**recipe.config(), "prompt": prompt[:200], "session_store": args.session_store}
    state = RunState(session_id=args.session, ext={"config": config})
    return drive(state, prompt, settings, json_out=args.json, asking=at_terminal(args.json))


@stops_in_words  # while it waits for a process left running (--wait), until the run starts
def cmd_resume(args: argparse.Namespace) -> int:
    from tether.cli.runs import LAST, latest_run
    from tether.harness.state import approve, reject

    settings = load_settings()
    store = run_store(settings)
    run_id = args.run_id
    if run_id == LAST:
        run_id = latest_run(settings, resumable=True)
        print(f"resuming {run_id} (last: the newest run that can be resumed)", file=sys.stderr)
    state = load_run(store, run_id)
    if state.status in ("completed", "failed"):
        raise usage_error(f"run {state.run_id} already ended ({state.status}); nothing to resume")
    _check_no_subagent(state, store)
    _check_resumable_config(state)
    if args.reason is not None and not args.approve:
        raise usage_error("--reason goes with --approve (--reject REASON takes its reason itself)")
    if args.call is not None and not args.approve and args.reject is None:
        raise usage_error("--call goes with --approve or --reject (it names the call they decide)")
    _check_limits_allow_more(state, args)
    _check_session_kept(state, settings)
    _settle_left_running(state, args)
    if args.approve or args.reject is not None:  # --call too: it names a call that waits
        _check_waits_for_decision(state)
    if args.approve:
        approve(state, args.call, reason=args.reason)
    elif args.reject is not None:
        reject(state, args.call, reason=args.reject)
    if args.max_turns is not None:
        state.config["max_turns"] = state.turns + args.max_turns
        print(
            f"resuming {state.run_id} for up to {args.max_turns} more turns (turn limit now "
            f"{state.turns + args.max_turns})",
            file=sys.stderr,
        )
    if args.max_budget is not None:
        state.config["max_budget_usd"] = args.max_budget
    if args.max_run_tokens is not None:
        state.config["max_run_tokens"] = args.max_run_tokens
    with _acting_for_its_user(state):
        return drive(state, None, settings, json_out=args.json, asking=at_terminal(args.json))


def _acting_for_its_user(state: RunState) -> contextlib.AbstractContextManager[None]:
    """A run `tether mcp serve` made for a token's user goes on as that user's: an MCP server that
    signs each user in gets their connection, never `tether mcp login`'s (the person resuming it),
    and nothing is asked at this terminal for it (it stops for the question, as where it was served)."""
    user = state.config.get("user")
    if state.config.get("served") != "mcp" or not isinstance(user, str):
        return contextlib.nullcontext()
    from tether.connectors._acting import acting_as

    return acting_as(user)


def _check_no_subagent(state: RunState, store: Any) -> None:
    """A sub-agent's run is resumed by its parent's (which hands it a person's decision, charges
    what it spends to the parent, and goes on with its answer): resumed alone, its answer would
    reach no one."""
    from tether.errors import StoreError, UserError
    from tether.harness.subagent import parent_of

    parent, call = parent_of(state)
    if parent is None:
        return
    top, seen = parent, {state.run_id}
    while top not in seen:  # the outermost run: a sub-agent's parent may be a sub-agent too
        seen.add(top)
        try:
            above = parent_of(store.load(top))[0]
        except (StoreError, UserError):
            break
        if above is None:
            break
        top = above
    via = "" if top == parent else f", itself a sub-agent's run inside run {top}"
    raise usage_error(
        f"run {state.run_id} is a sub-agent's run, started by call {call} of run {parent}{via}; "
        f"resume that run instead (`tether resume {top}`): it resumes its sub-agent where it stopped"
    )


def _check_resumable_config(state: RunState) -> None:
    """A header can pass its checksum and still lack what rebuilding the agent needs (an edited
    config): say which setting is missing instead of ending in a KeyError. Its directory must still
    be there."""
    from tether.errors import StoreError

    missing = [key for key in ("model", "cwd") if not isinstance(state.config.get(key), str)]
    if missing and state.config.get("served") is True:  # its agent is the server's, built there
        raise usage_error(
            f"run {state.run_id} is a run of `tether serve` (agent {state.config.get('agent')!r}); "
            f"nothing was run. Resume or decide it where it is served: POST /v1/runs/{state.run_id}/resume "
            "(or /decision), or the page's Resume button and approval card"
        )
    if missing:
        raise StoreError(
            f"run {state.run_id} cannot be resumed: its saved config has no {' and no '.join(missing)} "
            f"(the header was edited, or the run was not made by `tether run`); nothing was run. "
            "`tether show` still prints its transcript"
        )
    cwd = state.config["cwd"]
    if not Path(cwd).is_dir():  # as `tether run --cwd` refuses it: every file tool would fail there
        raise usage_error(
            f"run {state.run_id} works in {cwd}, which is no longer a directory; nothing was run. "
            "Put the directory back there, then resume"
        )


def _check_session_kept(state: RunState, settings: Settings) -> None:
    """A run of a conversation deleted since it stopped is not resumed: its messages would make the
    deleted conversation again (and its waiting call would run), as the server refuses a decision
    for a deleted session's run."""
    from tether.sessions import MemorySessionStore

    if not state.session_id or not state.session_synced:
        return
    sessions = open_sessions(state.config.get("session_store"), settings)
    if isinstance(sessions, MemorySessionStore) or sessions.load(state.session_id):
        return
    raise usage_error(
        f"session {state.session_id} was deleted after run {state.run_id} stopped; resuming the run "
        "would make that conversation again, so nothing was decided or run. Start a new conversation "
        f"instead (the run's transcript stays readable: tether show {state.run_id})"
    )


def _check_waits_for_decision(state: RunState) -> None:
    """--approve / --reject decide what the run stopped for: a run that stopped for no question (its
    process was killed while it ran, or it was cancelled) is resumed without a decision first, and
    stops again if a call it goes on with needs one."""
    waiting = state.interruption
    if (
        state.status == "interrupted"
        and waiting is not None
        and waiting.type not in ("cancelled", "max_turns", "max_budget")
    ):
        return
    if state.status == "running":
        how = "its process stopped while it ran"
    elif waiting is not None and waiting.type == "cancelled":
        how = f"it was cancelled ({getattr(waiting, 'reason', '')})"
    else:
        how = f"it stopped {state.status}"
    raise usage_error(
        f"run {state.run_id} is not waiting for a decision: {how}; nothing was decided or run. Resume it "
        f"without --approve or --reject (tether resume {state.run_id}): if a call needs a decision it "
        "stops again and says which"
    )


def _check_limits_allow_more(state: RunState, args: argparse.Namespace) -> None:
    """A run stopped at a limit would stop again at once unless the limit grows: say so."""
    if state.status == "max_turns_exceeded" and args.max_turns is None:
        limit = state.config.get("max_turns", DEFAULT_MAX_TURNS)
        raise usage_error(
            f"run {state.run_id} stopped at its turn limit ({limit} turns) and would stop again at "
            "once: resume it with --max-turns N to allow N more turns"
        )
    _check_token_limit_allows_more(state, args)
    from tether.harness.limits import stopped_at_token_limit
    from tether.harness.state import spent_unknown_usd

    spent = state.cost_usd + spent_unknown_usd(state.cost_unknown_usd, state.call_in_flight)  # as its resume counts
    if (
        state.status == "budget_exceeded"
        and not stopped_at_token_limit(state)
        and (args.max_budget is None or args.max_budget <= spent)
    ):
        budget = state.config.get("max_budget_usd")
        of = f" of ${budget:.6f}" if isinstance(budget, int | float) else ""
        raise usage_error(
            f"run {state.run_id} stopped at its budget (${spent:.6f} spent{of}): resume it with "
            f"--max-budget USD, a new total above ${spent:.6f}"
        )
    if args.max_budget is not None and args.max_budget <= spent:  # whatever it stopped for
        raise usage_error(
            f"--max-budget is run {state.run_id}'s new total budget, and it has already spent "
            f"${spent:.6f}: give a total above that (nothing was decided or run)"
        )


def _check_token_limit_allows_more(state: RunState, args: argparse.Namespace) -> None:
    """A run its token limit stopped needs a larger one (a new total, as --max-budget is), or it
    stops again at once; a new limit the run has already used is refused whatever it stopped for."""
    from tether.harness.limits import stopped_at_token_limit
    from tether.harness.state import spent_tokens_at_resume

    used, given = spent_tokens_at_resume(state), args.max_run_tokens  # as its resume counts
    if stopped_at_token_limit(state) and (given is None or given <= used):
        limit = state.config.get("max_run_tokens")
        of = f" of {limit:,}" if isinstance(limit, int) else ""
        raise usage_error(
            f"run {state.run_id} stopped at its token limit ({used:,} tokens used{of}): resume it with "
            f"--max-run-tokens N, a new total above {used:,}"
        )
    if given is not None and given <= used:
        raise usage_error(
            f"--max-run-tokens is run {state.run_id}'s new token limit, and it has already used {used:,} "
            "tokens: give a total above that (nothing was decided or run)"
        )


def at_terminal(json_out: bool) -> bool:
    """Whether a person can answer approval questions here (never with --json)."""
    return not json_out and sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()


def _settle_left_running(state: RunState, args: argparse.Namespace) -> None:
    """--kill / --wait: deal with a command a crashed run left running before deciding about it."""
    import asyncio
    import signal as os_signal

    from tether.cancel import CancelSignal
    from tether.errors import RunCancelled
    from tether.harness.state import kill_waiting_process, wait_for_waiting_process, waiting_process

    left = waiting_process(state)
    if args.kill:
        pid = kill_waiting_process(state)
        print(
            f"stopped process {pid} and everything it started" if pid else "no command was left running",
            file=sys.stderr,
        )
    elif args.wait and left is not None:

        async def wait() -> None:
            cancel = CancelSignal()
            asyncio.get_running_loop().add_signal_handler(os_signal.SIGINT, cancel.cancel, "Ctrl-C")
            # Said once Ctrl-C is heard here: before, it met the loop being made (a traceback).
            print(f"waiting for process {left.pid} to exit (Ctrl-C to stop waiting)...", file=sys.stderr, flush=True)
            await wait_for_waiting_process(state, cancel)

        still = (
            f"stopped waiting; process {left.pid} is still running and nothing was decided or run. Resume again "
            "later, or with --kill to stop it"
        )
        try:
            run_stoppable(wait())
        except (RunCancelled, KeyboardInterrupt):  # Ctrl-C: cancelled, as everywhere (exit 130), not a usage error
            print(f"tether: interrupted (Ctrl-C); {still}", file=sys.stderr)
            raise SystemExit(130) from None
        except Terminated:
            raise Terminated(still) from None


# --- driving a run ----------------------------------------------------------------------------


def drive(
    state: RunState, prompt: str | None, settings: Settings, *, json_out: bool, asking: bool, sandbox_line: bool = True
) -> int:
    """Run until the run stops; when it waits for a decision and a person can answer, ask and go
    on. Returns the exit code. ``sandbox_line=False``: the shell's sandbox was said already (a chat
    says it once, when it opens, not before every reply)."""
    with sigterm_held():
        return _drive(state, prompt, settings, json_out=json_out, asking=asking, sandbox_line=sandbox_line)


def _drive(
    state: RunState, prompt: str | None, settings: Settings, *, json_out: bool, asking: bool, sandbox_line: bool
) -> int:
    # With an output schema, stdout holds the validated JSON alone: the attempts are not streamed.
    structured = state.config.get("output_schema") is not None
    printer = Printer(settings, quiet=json_out or structured, asking=asking)
    check_home(settings)
    agent: Agent | None = _checked_agent(state, settings)
    if sandbox_line:
        printer.show_sandbox()
    while True:
        result = _execute(state, prompt, settings, printer, agent)
        prompt, agent = None, None  # after a decision the agent is built again, as on a resume
        waiting = _decision_needed(result)
        if asking and waiting is not None:
            answered = _ask_decision(state, waiting)
            if answered == 1 + len(waiting.together):
                continue
            if answered:  # some calls of the batch decided, not all: the run saves those decisions
                asking = False  # as it stops again at once for the rest, which are not asked again
                continue
        if not printer.quiet and not printer.streamed and result.status == "completed" and result.text:
            # An answer recorded but never shown (stdout failed, or its reader left, as it came), which
            # this resume did not ask the model for again: shown now, as it would have streamed.
            printer.out((shown(result.text, keep_newlines=True) if printer.tty else result.text) + "\n")
        printer.finish(result, state.model)
        if json_out:
            printer.out(result.model_dump_json(indent=2) + "\n")
        elif structured and result.typed:
            printer.out(json.dumps(result.output, indent=2, ensure_ascii=False) + "\n")
        if printer.stdout_error is not None:  # the run is kept, resumable if it was cut: said above
            print(f"tether: cannot write to stdout: {printer.stdout_error}", file=sys.stderr)
            return 1
        return READER_GONE if printer.reader_gone else exit_code(result)


def check_home(settings: Settings) -> None:
    """A run keeps its header under ``$TETHER_HOME/runs`` and its trace under ``traces``: a home
    where they cannot be written is said in one line before anything runs (tether.assembly.stores)."""
    from tether.assembly.stores import check_home as check

    check(settings)


def _decision_needed(result: RunResult) -> ApprovalInterruption | OutcomeUnknownInterruption | None:
    from tether.status import ApprovalInterruption, OutcomeUnknownInterruption

    waiting = result.interruption
    if isinstance(waiting, OutcomeUnknownInterruption) and waiting.still_running:
        return None  # approving would be refused while its command lives: --wait or --kill first
    return waiting if isinstance(waiting, ApprovalInterruption | OutcomeUnknownInterruption) else None


def _ask_decision(state: RunState, waiting: ApprovalInterruption | OutcomeUnknownInterruption) -> int:
    """Ask the person about the call, and about each call of its batch waiting with it, until one
    is not answered; record their decisions in the state. How many were answered."""
    answered = 0
    for one in (waiting, *waiting.together):
        if not _ask_one(state, one):
            break
        answered += 1
    return answered


def _ask_one(state: RunState, waiting: ApprovalInterruption | OutcomeUnknownInterruption) -> bool:
    from tether.harness.state import approve, reject

    # The model's words, escaped: a bidi override or a terminal escape in its arguments must not
    # make the call the person approves read as another (tether.cli.display.shown).
    call = shown(f"{waiting.tool_name} {args_json(waiting.args)}")
    if waiting.type == "outcome_unknown":
        question = f"{call} started before a crash and left no result. Run it again? [y/N] "
    else:
        question = f"Allow {call}? [y/N] "
    try:
        _drop_typed_ahead()
        answer = ask(question)
        if answer is None:
            return False
        if answer.strip().lower() in ("y", "yes"):  # a reason either way, as docs/cli.md says
            approve(state, waiting.call_id, reason=(ask("reason (optional): ") or "").strip() or None)
        else:
            reject(state, waiting.call_id, reason=(ask("reason (optional): ") or "").strip() or None)
    except (KeyboardInterrupt, Terminated):  # Ctrl-C or SIGTERM at the question: the run waits, resumable
        print(file=sys.stderr)
        return False
    return True


def _drop_typed_ahead() -> None:
    """Throw away what was typed at the terminal before a decision's question is on screen (the
    next chat message typed while the reply streamed, a key pressed early): only a line typed
    after the person has read the question answers it (as at an MCP server's question)."""
    from tether.connectors.forms import drop_typed_ahead

    drop_typed_ahead(sys.stdin)


def _checked_agent(state: RunState, settings: Settings) -> Agent:
    """The run's agent, checked as the run will check it: a missing key, an unknown provider, a
    budget for a model of unknown price, is said before anything else (the sandbox line included)."""
    from tether.harness.loop import check_agent

    agent = agent_of(state, settings)
    check_agent(agent)
    return agent


def _execute(
    state: RunState, prompt: str | None, settings: Settings, printer: Printer, agent: Agent | None = None
) -> RunResult:
    import asyncio
    import signal as os_signal

    from tether.cancel import CancelSignal
    from tether.harness.loop import run_stream
    from tether.providers.http import close_clients
    from tether.telemetry import telemetry_from_settings, trace_id_for
    from tether.tracing import FanoutTracer, JsonlTracer

    agent = agent or agent_of(state, settings)
    store = run_store(settings)
    sessions = open_sessions(state.config.get("session_store"), settings) if state.session_id else None
    telemetry = telemetry_from_settings(settings)
    tracer = FanoutTracer(JsonlTracer(settings.home / "traces"))
    if telemetry is not None:
        # One trace per run, whichever process runs or resumes it; a run with messages is resumed.
        tracer.tracers.append(
            telemetry.tracer(
                trace_id=trace_id_for(state.session_id or "", state.run_id),
                resumed=bool(state.messages),
                cost_usd=state.cost_usd,  # a resumed run's first chat span gets its own cost
                attributes={"tether.run_id": state.run_id, "tether.session_id": state.session_id},
            )
        )

    async def go() -> RunResult:
        cancel = CancelSignal()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(os_signal.SIGINT, cancel.cancel, "user pressed Ctrl-C")
        loop.add_signal_handler(os_signal.SIGTERM, cancel.cancel, TERMINATED)
        if (hangup := _hangup()) is not None:
            loop.add_signal_handler(hangup, _on_hangup, cancel)
        if terminated():  # SIGTERM came while the run was being built: it stops as it starts
            cancel.cancel(TERMINATED)
        printer.cancel = cancel
        result = None
        try:
            async for event in run_stream(
                agent, prompt, state=state, store=store, tracer=tracer, signal=cancel, session=sessions
            ):
                printer.show(event)
                if event.type == "done":
                    result = event.result
        finally:
            await close_clients()  # this loop ends here, and its pooled connections with it
        assert result is not None
        return result

    try:
        return asyncio.run(go())
    finally:
        hold_sigterm()  # the loop put SIGTERM's default back as it closed
        tracer.close()
        store.close()
        if telemetry is not None:
            telemetry.shutdown()  # sends the spans still waiting in the batch


def agent_of(state: RunState, settings: Settings) -> Agent:
    """The agent a run recorded when it began, built again: from its recipe, or for a run of
    `tether mcp serve --agent FILE`, from that file (its recorded limits, raised on resume, kept)."""
    from dataclasses import replace

    from tether.assembly import build_agent, served_agents
    from tether.errors import ConfigError

    spec, name = state.config.get("agent_spec"), state.config.get("agent")
    if not isinstance(spec, str):
        return build_agent(settings, recipe_of(state))
    served = f"run {state.run_id} is a run of `tether mcp serve --agent {spec}` (agent {name!r})"
    try:
        agents = served_agents(settings, spec)
    except ConfigError as exc:
        raise usage_error(f"{served}, and its agents cannot be built now: {exc}; nothing was run") from None
    agent = agents.get(name) if isinstance(name, str) else None
    if agent is None:
        raise usage_error(
            f"{served}, which {spec} no longer defines (it defines: {', '.join(agents)}); nothing was run"
        )
    limits = {
        key: state.config[key] for key in ("max_turns", "max_budget_usd", "max_run_tokens") if key in state.config
    }
    return replace(agent, **limits)


def recipe_of(state: RunState) -> Recipe:
    """The agent a run recorded when it began: a resume builds the same one."""
    from pydantic import ValidationError

    from tether.assembly import Recipe

    try:
        return Recipe.model_validate(state.config)
    except ValidationError:
        raise usage_error(
            f"run {state.run_id} was not started by tether run or chat (its config records no model and "
            "directory): resume it where it was started"
        ) from None


# How a call that did not succeed reads, by its status (anything else is an error).
_NOT_OK = {"rejected": "declined", "skipped": "skipped", "interrupted": "interrupted"}


class Printer:
    """Readable progress on stderr; the streamed answer on stdout.

    ``asking``: a person at the terminal answers approval questions, so the "needs approval" line
    is left to the question itself."""

    def __init__(self, settings: Settings, *, quiet: bool, asking: bool = False) -> None:
        self.settings = settings
        self.quiet = quiet
        self.asking = asking
        self.text_open = False
        self.streamed = False  # some of an answer was written to stdout
        self.cancel: CancelSignal | None = None  # the running part's Stop button
        self.reader_gone = False  # stdout is a pipe whose reader left (`| head -1`), or cannot be written
        self.stdout_error: str | None = None  # ... why it cannot (a full disk)
        # At a terminal the streamed answer is escaped as `tether show` escapes it: the model's
        # text could otherwise set the title, write the clipboard or hide lines. A pipe gets it as is.
        self.tty = sys.stdout is not None and sys.stdout.isatty()

    def out(self, text: str) -> None:
        """``text`` on stdout. When its reader has gone (`tether run ... | head -1`), the run stops as
        a Stop stops it, and what is left goes nowhere: the steps and the summary line still reach
        stderr, with the resume hint."""
        import os

        if self.reader_gone:
            return
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            self.reader_gone = True
            with contextlib.suppress(OSError, ValueError):  # the buffer's rest is never flushed to the pipe
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            if self.cancel is not None:
                self.cancel.cancel(READER_LEFT)
        except OSError as exc:
            import errno

            if exc.errno == errno.EIO:
                self._closed_under(exc)
            else:  # a file on a full disk (`> answer.txt`): the run stops as when the reader leaves
                self.reader_gone = True
                self.stdout_error = exc.strerror or str(exc)
                with contextlib.suppress(OSError, ValueError):
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                if self.cancel is not None:
                    self.cancel.cancel(f"{STDOUT_FAILED} ({self.stdout_error})")

    def _closed_under(self, exc: OSError) -> None:
        """A write to the terminal failed because it was closed (EIO): the SIGHUP it sends may not be
        handled yet, and the write came first. The same as SIGHUP: the run stops and is saved."""
        import errno

        if exc.errno != errno.EIO:
            raise exc
        _on_hangup(self.cancel)

    def _err(self, line: str) -> None:
        if self.text_open:
            self.out("\n")
            self.text_open = False
        try:
            print(shown(line), file=sys.stderr, flush=True)  # tool names, arguments, reasons: text from outside
        except OSError as exc:
            self._closed_under(exc)

    def show_sandbox(self) -> None:
        """The run's first line: which sandbox the shell runs in, and who is asked (tether.tools.sandbox)."""
        from tether.tools.builtin import tool_settings
        from tether.tools.sandbox import sandbox_status

        self._err(sandbox_status(tool_settings(self.settings.tools).shell).sentence)

    def show(self, event: Any) -> None:
        kind = event.type
        if kind == "text_delta":
            if not self.quiet:
                self.out(shown(event.text, keep_newlines=True) if self.tty else event.text)
                self.text_open = self.streamed = True
        elif kind == "tool_start":
            self._err(f"-> {event.tool_name} {event.args}")
        elif kind == "tool_progress":
            self._err(f"   .. {event.label}")
        elif kind == "tool_result":
            word = "ok" if event.ok else _NOT_OK.get(event.status, "error")
            self._err(f"   {word} {event.tool_name} ({event.status}, {event.ms:.0f} ms)")
        elif kind == "retry":
            self._err(f"   retry {event.attempt}: {event.reason} (waiting {event.wait_s:.1f} s)")
        elif kind == "fallback":
            self._err(f"!! falling back from {event.from_model} to {event.to_model}: {event.reason}")
        elif kind == "memory_write":
            self._err(f"   memory: {event.action} in {event.store} ({event.chars:,}/{event.limit:,} chars)")
        elif kind == "memory_rejected":
            self._err(f"   memory: {event.action} refused ({event.rule})")
        elif kind == "approval_required" and not self.asking:
            what = (
                "outcome unknown (cut off before it finished)"
                if event.reason == "outcome_unknown"
                else "needs approval"
            )
            self._err(f"!! {event.tool_name} {event.args} {what}")

    def finish(self, result: RunResult, model: str | None) -> None:
        """The summary line (and what to do next), when the run has really stopped."""
        from tether.cli.display import summary_lines

        for line in summary_lines(result, model, self.settings):
            self._err(line)
