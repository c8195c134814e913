"""Closing review of session sixteen: defects found in its own commits."""

from __future__ import annotations

from tether import Agent, tool


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
