"""The run's governance against a misbehaving model, attacked from outside (session 14): typed
answers, the loop guard and the governors.

* A pydantic model that refers to itself (a tree, a thread of replies) was refused as an
  ``output_type``: "the output schema must describe a JSON object". Its JSON Schema's root is a
  reference into ``$defs`` (pydantic writes it so); the definition it points to now stands at the
  root, so both wires get the object they need, and a JSON Schema dict written the same way works
  too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tether import Agent, run_sync
from tether.messages import Message
from tether.providers.anthropic import answer_tool
from tether.providers.base import ModelRequest
from tether.providers.openai_chat import response_format
from tether.testing import FunctionModel

# -- 1. a typed answer that refers to itself ---------------------------------------------------


class Node(BaseModel):
    name: str
    children: list[Node]


NODE_SCHEMA: dict[str, Any] = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name", "children"],
        }
    },
    "$ref": "#/$defs/node",
    "title": "Tree",
}


def test_a_typed_answer_that_refers_to_itself_is_asked_for_and_validated() -> None:
    sent: list[ModelRequest] = []

    def model(messages: list[Message], request: ModelRequest) -> str:
        sent.append(request)
        if len(sent) == 1:
            return '{"name": "root", "children": [{"name": "leaf", "children": "none"}]}'
        return '{"name": "root", "children": [{"name": "leaf", "children": []}]}'

    for output_type in (Node, NODE_SCHEMA):
        sent.clear()
        # Before: ConfigError, 'the output schema must describe a JSON object ("type": "object")'.
        result = run_sync(Agent(FunctionModel(model), output_type=output_type), "the tree, please")
        assert result.status == "completed" and result.typed, result.reason
        leaf = result.output.children[0] if output_type is Node else result.output["children"][0]
        assert (leaf.name if output_type is Node else leaf["name"]) == "leaf"
        assert len(sent) == 2  # the wrong shape deep in the tree was corrected
        schema = sent[0].output_schema
        assert schema is not None and schema.schema["type"] == "object" and "$ref" not in schema.schema
        fmt = response_format(schema)["json_schema"]
        assert fmt["strict"] is True  # every field required: strict mode takes it, references and all
        assert fmt["schema"]["$defs"] and answer_tool(schema)["input_schema"]["type"] == "object"
