"""The public surface is explicit, and importing tether does nothing but define names."""

from __future__ import annotations

import subprocess
import sys

import tether

EXPECTED = {
    "Agent",
    "CancelSignal",
    "JsonlTracer",
    "Price",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunStore",
    "Stop",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "Usage",
    "__version__",
    "approve",
    "has_tool_call",
    "pending_tool_calls",
    "reject",
    "run",
    "run_stream",
    "run_sync",
    "step_count_is",
    "tool",
}


def test_all_is_explicit_and_resolves() -> None:
    assert set(tether.__all__) == EXPECTED
    for name in tether.__all__:
        assert getattr(tether, name) is not None


def test_import_is_lazy_and_silent() -> None:
    code = "import sys, tether; print(sorted(m for m in ('httpx', 'pydantic', 'bpe_openai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]" and out.stderr == ""


def test_tool_decorator_builds_schema_from_hints() -> None:
    @tether.tool(read_only=True)
    def weather(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        return city

    assert weather.name == "weather" and weather.description == "Forecast for a city."
    assert weather.input_schema["required"] == ["city"]
    assert weather.input_schema["properties"]["days"] == {"default": 1, "type": "integer"}
    assert weather.read_only and not weather.needs_approval
    assert isinstance(weather, tether.Tool)


def test_importing_the_api_builds_no_validator_and_loads_no_client() -> None:
    # Validators are built on first use and the HTTP stack is loaded by the first request, so a
    # program that imports tether and does something else (``--help``, a config error) pays neither.
    code = (
        "import sys\n"
        "from tether import Agent, run, tool\n"
        "from pydantic import BaseModel\n"
        "def subclasses(c):\n"
        "    for s in c.__subclasses__():\n"
        "        yield s\n"
        "        yield from subclasses(s)\n"
        "built = sorted(c.__name__ for c in subclasses(BaseModel)\n"
        "               if c.__module__.startswith('tether') and c.__pydantic_complete__)\n"
        "print(built, sorted(m for m in ('httpx', 'sqlite3', 'tether.harness.store') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []", out.stdout
    state = tether.RunState()  # and the first use builds them
    assert state.usage == tether.Usage() and type(state).__pydantic_complete__
