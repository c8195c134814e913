"""Token counting is the real o200k_base BPE, shipped in a package: it works with no network."""

from __future__ import annotations

import json

from tether.tokens import count_tokens, encoding, estimate_tokens


def test_o200k_base_ids_are_the_real_ones() -> None:
    # These ids are o200k_base's; cl100k_base gives [15339, 1917] for the same text.
    assert encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert count_tokens("errors.log mentions a timeout") > 3


def test_estimate_weights_cjk_more_than_latin() -> None:
    assert estimate_tokens("a" * 400) == 100
    assert estimate_tokens("你" * 100) == 150
    assert estimate_tokens("") == 0


def test_one_estimate_of_a_prompt_for_budgets_and_for_unreported_usage() -> None:
    """The budget's estimate of what every call sends (system prompt, tool definitions) and the
    estimate of a call whose usage the server left out once disagreed on a tool definition's
    cost (16 tokens against 8): both are now tether.tokens' one estimate."""
    from tether.harness.context import fixed_prompt_tokens
    from tether.messages import AssistantMessage, TextPart, UserMessage
    from tether.providers.base import ModelRequest, ToolDefinition, estimate_usage
    from tether.tokens import PER_MESSAGE, message_tokens, tool_tokens

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    defs = (ToolDefinition("read_file", "Read a file.", schema), ToolDefinition("list_files", "List files.", schema))
    reply = AssistantMessage(content=(TextPart(text="ok"),))
    question = UserMessage.text("What is in notes.txt?")
    for tools in (defs[:1], defs):
        request = ModelRequest(model="m", system="Be brief.", messages=[question], tools=tools)
        unreported = estimate_usage(request, reply, len).prompt_tokens
        assert unreported == fixed_prompt_tokens("Be brief.", tools, len) + message_tokens(question, len)
    one_more = fixed_prompt_tokens("Be brief.", defs, len) - fixed_prompt_tokens("Be brief.", defs[:1], len)
    assert one_more == tool_tokens("list_files", "List files.", schema, len)
    assert one_more == 8 + len("list_files") + len("List files.") + len(json.dumps(schema))
    assert message_tokens(reply, len) == PER_MESSAGE + 2
