"""Token counting is the real o200k_base BPE, shipped in a package: it works with no network."""

from __future__ import annotations

import json

import pytest

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


def test_the_direct_tokenizer_counts_as_the_package_does() -> None:
    # tether loads bpe-openai's Rust tokenizer without the package's wrapper (whose import decodes
    # three rank tables); every kind of text must give the wrapper's encode_ordinary ids.
    import bpe_openai  # type: ignore[import-untyped]

    from tether import tokens

    direct = tokens._rust_backend("o200k_base")
    assert isinstance(direct, tokens._RustEncoding)
    wrapper = bpe_openai.get_encoding("o200k_base")
    texts = [
        "hello world",
        "<|endoftext|> is text here, and so is <|endofprompt|>",
        "日本語のテキストと한국어",
        "  \n\n\t  trailing spaces   \n",
        "a lone \ud800 surrogate",
        "x" * 5_000,
        "def f(x):\n    return x ** 2  # comment\n" * 50,
        "emoji 👩‍👩‍👧 and accents: café naïve",
    ]
    for text in texts:
        assert direct.encode_ordinary(text) == wrapper.encode_ordinary(text), text[:40]


def test_loading_the_tokenizer_does_not_import_the_package_wrapper() -> None:
    import subprocess
    import sys

    code = (
        "import sys\nfrom tether.tokens import count_tokens, encoding\nencoding()\n"
        "print(count_tokens('hello world'), 'bpe_openai' in sys.modules, type(encoding()).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["2", "False", "_RustEncoding"]


def test_the_package_api_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether import tokens

    monkeypatch.setattr(tokens, "_rust_backend", lambda name: None)
    tokens._load.cache_clear()
    try:
        enc = tokens.encoding()
        assert type(enc).__name__ == "Encoding"  # bpe_openai's own
        assert enc.encode_ordinary("hello world") == [24912, 2375]
    finally:
        tokens._load.cache_clear()
