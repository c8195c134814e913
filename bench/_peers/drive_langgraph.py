"""LangChain's ChatOpenAI in LangGraph's prebuilt ReAct agent (a model node and a tool node)."""

import time

_T0 = time.perf_counter()
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.errors import GraphRecursionError  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402

TOOLS = [tool(pc.list_files), tool(pc.read_file)]


async def run_once(scenario: str, max_turns: int) -> str:
    llm = ChatOpenAI(model=scenario, base_url=pc.base_url(), api_key="sk-dummy")
    agent = create_react_agent(llm, TOOLS, prompt=pc.INSTRUCTIONS)
    try:
        # Two graph steps per turn (model, tools): max_turns model calls fit in 2 × max_turns.
        state = await agent.ainvoke({"messages": [("user", pc.PROMPT)]}, {"recursion_limit": 2 * max_turns})
    except GraphRecursionError:
        return "max turns"
    return str(state["messages"][-1].content)


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"langgraph {version('langgraph')}, langchain-openai {version('langchain-openai')}")
