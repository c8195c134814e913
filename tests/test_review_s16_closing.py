"""Closing review of session sixteen: defects found in its own commits."""

from __future__ import annotations

from tether import Agent, run_sync, tool


def _noted(city: str) -> str:
    """Forecast for a city.

    Args:
        city: The city.

    Note:
        Only call this after asking the person which units they want.

    Warning:
        Each call costs a request of the paid forecast service.
    """
    return city


def _numpy_warned(query: str) -> str:
    """Search the catalog.

    Parameters
    ----------
    query : str
        The text.

    Warnings
    --------
    Never pass a person's email address.
    """
    return query


def _rest_warned(path: str) -> str:
    """Read a file.

    :param path: the path
    :returns: its text

    .. warning:: Never read /etc/shadow.
    """
    return path


def test_a_docstrings_other_sections_stay_in_the_description_when_its_parameters_leave() -> None:
    # 54cf013b rebuilt the description from what docstring-parser keeps: Google's Note: and
    # Warning: were dropped whole, words written for the model.
    made = tool(_noted)
    assert "Only call this after asking the person which units they want." in made.description
    assert "Each call costs a request" in made.description
    assert "The city." not in made.description
    assert made.input_schema["properties"]["city"]["description"] == "The city."
    numpy = tool(_numpy_warned)
    assert "Never pass a person's email address." in numpy.description
    assert "The text." not in numpy.description
    rest = tool(_rest_warned)
    assert "Never read /etc/shadow." in rest.description and "its text" in rest.description
    assert ":param" not in rest.description


def _weather(city: str) -> str:
    """Weather in a city."""
    return "sun"


def test_a_plain_function_added_to_an_agents_tools_after_it_was_made_is_a_tool_too() -> None:
    # 1b171eb6 made a plain function a tool in Agent.__post_init__ only: one appended to
    # agent.tools (or tools assigned) afterwards was refused as "not a tool" at the run's start.
    agent = Agent(model="scripted", tools=[])
    agent.tools.append(_weather)
    assert list(agent.tool_map()) == ["_weather"]
    agent.tools = [_weather, tool(_noted)]
    assert sorted(agent.tool_map()) == ["_noted", "_weather"]


def test_a_sub_agents_cwd_the_parent_makes_during_its_run_is_not_refused_at_the_parents_start(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # f52692f5 refused an Agent whose cwd is no directory; the check also ran on every sub-agent
    # when the parent's run started, so a child given a folder the parent makes first (a build or
    # scratch folder) failed the parent before its model was asked. The child's own start checks it.
    from tether.messages import UserMessage
    from tether.testing import FunctionModel, Reply

    build = tmp_path / "build"

    def make_build_dir() -> str:
        """Make the build folder."""
        build.mkdir()
        return "made"

    seen_in_child: list[bool] = []

    def child_model(messages, request):  # type: ignore[no-untyped-def]
        seen_in_child.append(build.is_dir())
        return "built"

    builder = Agent(FunctionModel(child_model), cwd=build).as_tool("builder", "Builds in the build folder.")

    def parent_model(messages, request):  # type: ignore[no-untyped-def]
        if isinstance(messages[-1], UserMessage):
            return Reply(calls=(("c1", "make_build_dir", {}),))
        if len(messages) == 3:
            return Reply(calls=(("c2", "builder", {"task": "build it"}),))
        return "done"

    parent = Agent(FunctionModel(parent_model), tools=[make_build_dir, builder])
    result = run_sync(parent, "make the folder, then build")
    assert result.status == "completed", result
    assert seen_in_child == [True]
