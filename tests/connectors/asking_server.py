"""A stdio MCP server whose tools ask the person for input (elicitation), for the tests of questions
in served runs. Each booking it makes is appended to the file in ``$BOOKINGS`` (its side effect,
made only after every question was answered).

It asks as MCP 2026-07-28 servers do when that version is agreed (the Python SDK's client and
server agree on it): the call answers ``input_required`` with the questions, and the client calls
again with the answers (and the ``request_state`` it was given); with an older version, by an
``elicitation/create`` request during the call.

* ``book_table(day)``: asks for a name, the number of guests and a window seat, then books;
* ``book_trip(city)``: asks two questions in turn (the traveller, then the class), then books;
* ``summarise(text)``: asks the client's model for a summary (sampling) and returns it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

M = TypeVar("M", bound=BaseModel)

server = MCPServer("diner")


class Guest(BaseModel):
    name: str = Field(description="whose name the table is under")
    guests: int = Field(ge=1, le=12)
    window: bool = False


class Traveller(BaseModel):
    name: str


class Seat(BaseModel):
    seat_class: str = Field(json_schema_extra={"enum": ["economy", "business"]})


def _book(line: str) -> str:
    with Path(os.environ["BOOKINGS"]).open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    return f"Booked: {line}"


class Asked:
    """One question's outcome: ``action``, and the answer as ``model`` when accepted."""

    def __init__(self, action: str, data: Any = None) -> None:
        self.action, self.data = action, data


async def ask(
    ctx: Context, key: str, message: str, model: type[M], state: dict[str, Any]
) -> Asked | InputRequiredResult:
    """The person's answer to ``message``, or (2026-07-28) the ``input_required`` result asking it."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        said = await ctx.elicit(message, schema=model)
        return Asked(said.action, said.data)
    response = (ctx.input_responses or {}).get(key)
    if response is None:
        form = ElicitRequestFormParams(message=message, requested_schema=model.model_json_schema())
        return InputRequiredResult(
            input_requests={key: ElicitRequest(params=form)}, request_state=json.dumps(state) if state else None
        )
    action = getattr(response, "action", "cancel")
    if action != "accept":
        return Asked(action)
    return Asked(action, model.model_validate(getattr(response, "content", None) or {}))


def earlier(ctx: Context) -> dict[str, Any]:
    return json.loads(ctx.request_state) if ctx.request_state else {}


@server.tool()
async def book_table(day: str, ctx: Context) -> str | InputRequiredResult:
    """Books a table for a day; asks the person who for and how many."""
    asked = await ask(ctx, "guest", f"Who is the table on {day} for?", Guest, {})
    if isinstance(asked, InputRequiredResult):
        return asked
    if asked.action != "accept":
        return f"Not booked: the person chose {asked.action}."
    g = asked.data
    return _book(f"{day} for {g.name}, {g.guests} guests, window {'yes' if g.window else 'no'}")


@server.tool()
async def book_trip(city: str, ctx: Context) -> str | InputRequiredResult:
    """Books a trip; asks the traveller's name, then the class."""
    state = earlier(ctx)
    if "name" not in state:
        who = await ask(ctx, "who", f"Who travels to {city}?", Traveller, {})
        if isinstance(who, InputRequiredResult):
            return who
        if who.action != "accept":
            return f"Not booked: the person chose {who.action}."
        state = {"name": who.data.name}
    seat = await ask(ctx, "seat", f"Which class for {state['name']}?", Seat, state)
    if isinstance(seat, InputRequiredResult):
        return seat
    if seat.action != "accept":
        return f"Not booked: the person chose {seat.action}."
    return _book(f"{city} for {state['name']} in {seat.data.seat_class}")


@server.tool()
async def summarise(text: str, ctx: Context) -> str | InputRequiredResult:
    """Summarises a text with the client's model."""
    wanted = CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise: {text}"))],
        max_tokens=100,
    )
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        try:
            made = await ctx.session.create_message(wanted.messages, max_tokens=100)
        except Exception as exc:  # the client refused
            return f"No summary: {exc}"
        return f"Summary: {getattr(made.content, 'text', '')}"
    response = (ctx.input_responses or {}).get("draft")
    if response is None:
        return InputRequiredResult(input_requests={"draft": CreateMessageRequest(params=wanted)})
    if not hasattr(response, "content"):
        return f"No summary: {getattr(response, 'message', response)}"
    return f"Summary: {getattr(response.content, 'text', '')}"


if __name__ == "__main__":
    server.run()
