"""A new user's first agent (session 16): what the README, quick start and API reference lead to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from tether import Agent, run_sync, tool
from tether.testing import FunctionModel, call


def test_a_parameter_described_with_annotated_field_keeps_its_description_for_the_model() -> None:
    # get_type_hints() without include_extras dropped the Annotated metadata: the description a
    # person wrote for the model never reached the schema, and neither did its constraints.
    @tool
    def forecast(
        city: Annotated[str, Field(description="The city, as the person wrote it")],
        days: Annotated[int, Field(ge=1, le=7, description="How many days ahead")] = 3,
    ) -> str:
        """Forecast for a city."""
        return f"{city}: sunny for {days} days"

    props = forecast.input_schema["properties"]
    assert props["city"]["description"] == "The city, as the person wrote it"
    assert props["days"]["description"] == "How many days ahead"
    assert props["days"]["maximum"] == 7

    def model(messages: list, request: object) -> object:
        if messages[-1].role == "user":
            return call("c1", "forecast", {"city": "Lyon", "days": 30})
        return str(messages[-1].content[0].text)

    result = run_sync(Agent(FunctionModel(model), tools=[forecast]), "weather?")
    assert "days: Input should be less than or equal to 7" in str(result.output)


def test_a_provider_built_in_code_with_its_key_asks_for_the_model_it_was_given() -> None:
    # The way to give a key from code (a secrets manager, not the environment) is to build the
    # provider; Agent(OpenAIChatProvider(api_key=...)) sent the provider's name, "openai", as the
    # model, and no argument said which model to ask for (tether's own tests set an attribute).
    from tether.providers.anthropic import AnthropicProvider
    from tether.providers.openai_chat import OpenAIChatProvider
    from tether.testing import ScriptedServer

    with ScriptedServer() as server:
        provider = OpenAIChatProvider(server.base_url, api_key="sk-from-a-vault", model_id="hello")
        result = run_sync(Agent(provider), "hi")
        assert result.status == "completed", result.reason
        assert result.output

        provider_a = AnthropicProvider(server.root_url, api_key="sk-ant-from-a-vault", model_id="hello")
        result = run_sync(Agent(provider_a), "hi")
        assert result.status == "completed", result.reason


def test_a_plain_function_in_tools_is_a_tool_and_a_lone_tool_is_refused_saying_what_to_write() -> None:
    # The commonest first mistake (Pydantic AI and LangChain take plain functions): it raised
    # AttributeError "'function' object has no attribute 'name'" from inside the loop; it is now
    # a tool as @tool makes it. tools=weather raised "'FunctionTool' object is not iterable".
    from tether.errors import ConfigError

    calls: list[str] = []

    def weather(city: str) -> str:
        """Today's forecast for a city."""
        calls.append(city)
        return f"sunny in {city}"

    def model(messages: list, request: object) -> object:
        if messages[-1].role == "user":
            assert [t.name for t in request.tools] == ["weather"], request.tools  # type: ignore[attr-defined]
            return call("c1", "weather", {"city": "Lyon"})
        return str(messages[-1].content[0].text)

    agent = Agent(FunctionModel(model), tools=[weather])
    assert agent.tools[0].description == "Today's forecast for a city."
    result = run_sync(agent, "weather?")
    assert (result.status, result.output, calls) == ("completed", "sunny in Lyon", ["Lyon"])
    with pytest.raises(ConfigError, match=r"tools is a list of tools: write tools=\[weather\]"):
        run_sync(Agent("scripted/hello", tools=tool(weather)), "hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"tools\[1\] \('sunny'\) is not a tool"):
        run_sync(Agent("scripted/hello", tools=[tool(weather), "sunny"]), "hi")


def test_a_run_with_no_prompt_and_nothing_to_resume_is_refused_before_the_model_is_asked() -> None:
    # run_sync(agent) with no prompt sent the model an empty conversation (a real API refuses it
    # with a 400, after the retries) and the scripted one "completed".
    import pytest

    from tether import RunState
    from tether.errors import UserError

    fm = FunctionModel(lambda messages, request: "an answer to nothing")
    with pytest.raises(UserError, match=r"nothing to answer: give a prompt"):
        run_sync(Agent(fm))
    with pytest.raises(UserError, match=r"nothing to answer"):
        run_sync(Agent(fm), state=RunState())
    assert fm.requests == []
    assert run_sync(Agent(fm), "hi").status == "completed"


def test_a_decision_on_a_call_that_is_not_waiting_names_the_calls_that_are() -> None:
    # reject(state, "no") takes a one-word reason for a call id (the deprecated order); the error
    # said only "call 'no' is not waiting for a decision", not which calls were, nor where a reason goes.
    import pytest

    from tether import RunState, reject
    from tether.errors import UserError

    @tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    def model(messages: list, request: object) -> object:
        return call("c1", "refund", {"order_id": "A1"})

    state = RunState()
    run_sync(Agent(FunctionModel(model), tools=[refund]), "go", state=state)
    with pytest.raises(
        UserError, match=r"\(waiting: c1 \(refund\)\): name one of those.*a reason is given apart \(reason=\.\.\.\)"
    ):
        reject(state, "no")


def test_a_bad_otlp_base_endpoint_is_shown_as_written_with_an_example_that_works_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318 was refused quoting 'localhost:4318/v1/traces' (a
    # value the person never wrote) and suggesting http://127.0.0.1:4318/v1/traces, which in this
    # variable (a base URL: tether appends /v1/traces) becomes .../v1/traces/v1/traces, a 404.
    from tether.config import Settings
    from tether.errors import ConfigError
    from tether.telemetry import telemetry_from_settings

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")
    with pytest.raises(ConfigError) as refused:
        telemetry_from_settings(Settings(home=tmp_path))
    message = str(refused.value)
    assert "not 'localhost:4318'" in message, message
    assert "such as http://127.0.0.1:4318 " in message and "/v1/traces/v1/traces" not in message, message


def test_an_agent_whose_cwd_is_no_directory_is_refused_before_the_model_is_asked(tmp_path: Path) -> None:
    # Agent(cwd="/nonexistent") ran: every file tool failed there and the run "completed" with an
    # answer made of those failures, where `tether run --cwd` refuses the same directory.
    from tether.errors import ConfigError

    asked: list[object] = []
    fm = FunctionModel(lambda messages, request: asked.append(request) or "done")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x", encoding="utf-8")
    for cwd in (tmp_path / "missing", a_file, str(tmp_path / "missing")):
        with pytest.raises(ConfigError, match=r"is not a directory: the agent's file and shell tools work there"):
            run_sync(Agent(fm, cwd=cwd), "list the files")
    assert asked == []
    assert run_sync(Agent(fm, cwd=tmp_path), "list the files").status == "completed"


def test_a_lambda_in_tools_is_refused_saying_what_to_give() -> None:
    # Wrapped as a plain function it became a tool named '<lambda>', which every provider refuses
    # as a tool name only when the model is asked.
    from tether.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"tools\[0\] is a lambda, which has no name to be called by: define it with def"
    ):
        run_sync(Agent("scripted/hello", tools=[lambda city: city]), "hi")


def test_the_callers_list_of_tools_stays_the_agents() -> None:
    # Wrapping plain functions made every agent's tools a new list: a tool the caller appended to
    # its own list after making the agent no longer reached it, and a tuple became a list.
    from tether.tools.files import FILE_TOOLS

    mine = list(FILE_TOOLS)
    agent = Agent("scripted/hello", tools=mine)
    assert agent.tools is mine

    def weather(city: str) -> str:
        """Today's forecast for a city."""
        return city

    mine.append(tool(weather))
    assert "weather" in agent.tool_map()
    kept = tuple(FILE_TOOLS)
    assert Agent("scripted/hello", tools=kept).tools is kept
