"""A tool's docstring section for its parameters (Google, NumPy, reST) goes into its schema, as the
OpenAI Agents SDK and Pydantic AI read it: a tool written for them keeps what it tells the model."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from tether import tool


def _google(city: str, days: int = 3) -> str:
    """Look up the weather.

    Uses the forecast service.

    Args:
        city (str): The city, as the person wrote it.
            Without its country.
        days: How many days ahead.

    Returns:
        The forecast, one line a day.
    """
    return city


def _numpy(city: str, days: int = 3) -> str:
    """Look up the weather.

    Parameters
    ----------
    city : str
        The city, as the person wrote it.
    days : int, optional
        How many days ahead.
    """
    return city


def _rest(city: str, days: int = 3) -> str:
    """Look up the weather.

    :param city: The city, as the person wrote it.
    :param days: How many days ahead.
    """
    return city


@pytest.mark.parametrize("fn", [_google, _numpy, _rest], ids=["google", "numpy", "rest"])
def test_each_parameter_s_words_go_into_the_schema_and_out_of_the_description(fn: object) -> None:
    made = tool(fn)  # type: ignore[call-overload]
    props = made.input_schema["properties"]
    assert props["city"]["description"].startswith("The city, as the person wrote it.")
    assert props["days"]["description"] == "How many days ahead."
    assert made.description.startswith("Look up the weather.")
    assert "How many days ahead" not in made.description
    assert "Args:" not in made.description and ":param" not in made.description


def test_the_google_description_keeps_its_body_and_what_it_returns() -> None:
    made = tool(_google)
    assert made.description == (
        "Look up the weather.\n\nUses the forecast service.\n\nReturns:\n    The forecast, one line a day."
    )
    assert made.input_schema["properties"]["city"]["description"] == (
        "The city, as the person wrote it.\nWithout its country."
    )


def test_a_hint_s_own_description_wins_and_a_plain_docstring_is_kept_whole() -> None:
    @tool
    def forecast(city: Annotated[str, Field(description="From the hint.")], days: int = 3) -> str:
        """Forecast.

        Args:
            city: From the docstring.
            days: Days ahead.
        """
        return city

    props = forecast.input_schema["properties"]
    assert (props["city"]["description"], props["days"]["description"]) == ("From the hint.", "Days ahead.")

    @tool
    def plain(city: str) -> str:
        """Say which arguments matter: the city only.

        Args are read by the service later."""
        return city

    assert plain.description == "Say which arguments matter: the city only.\n\nArgs are read by the service later."
    assert "description" not in plain.input_schema["properties"]["city"]


def test_a_described_parameter_the_function_does_not_have_is_left_out() -> None:
    @tool
    def forecast(city: str) -> str:
        """Forecast.

        Args:
            city: The city.
            country: A parameter this function no longer has.
        """
        return city

    assert set(forecast.input_schema["properties"]) == {"city"}
    assert forecast.validate_input({"city": "Lyon"}) == {"city": "Lyon"}
