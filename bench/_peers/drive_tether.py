"""tether: a new Agent("openai/<scenario>") per run, as a program builds it; with
TETHER_BENCH_STORE=1, a RunStore and a JsonlTracer in one home for the process (as the CLI runs)."""

import time

_T0 = time.perf_counter()
from tether import Agent, JsonlTracer, RunStore, run, tool  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import os  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import peer_common as pc  # noqa: E402

TOOLS = [tool(read_only=True)(pc.list_files), tool(read_only=True)(pc.read_file)]
HOME = Path(tempfile.mkdtemp(prefix="tether-peers-")) if os.environ.get("TETHER_BENCH_STORE") else None


async def run_once(scenario: str, max_turns: int) -> str:
    agent = Agent(
        f"openai/{scenario}",
        instructions=pc.INSTRUCTIONS,
        tools=TOOLS,
        cwd=pc.workspace(),
        max_turns=max_turns,
        stream=False,
    )
    store = RunStore(HOME / "runs") if HOME else None
    tracer = JsonlTracer(HOME / "traces") if HOME else None
    try:
        result = await run(agent, pc.PROMPT, store=store, tracer=tracer)
    finally:
        if tracer is not None:
            tracer.close()
    if result.status == "failed":
        raise RuntimeError(f"run failed: {result.reason}")
    return result.output or str(result.status)


if __name__ == "__main__":
    import shutil
    from importlib.metadata import version

    try:
        pc.main(run_once, IMPORT_S, f"tether {version('tether')}")
    finally:
        if HOME:
            shutil.rmtree(HOME, ignore_errors=True)
