"""Skills attacked from outside (a helper's fourth round): the search for skills when a run starts.

A session's index was searched with ``prompt_block``, called on the event loop as the run began:
a skills folder on a slow or hung network mount held up every run of the process (a server's
other users) for as long as the search took. The search now runs on a worker thread when the
run's extensions start.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from tests.skills.conftest import write_skill
from tether import Agent, run_stream
from tether.skills import Discovery, SkillFolders, SkillRoot, Skills
from tether.status import RunResult
from tether.testing import FunctionModel


class HungMount:
    """Skills on a mount that answers only once another run of the process has finished (or
    after a guard of 10 s, so a broken build fails rather than hangs)."""

    def __init__(self, root: Path) -> None:
        self.inner = SkillFolders([SkillRoot(root, "user")])
        self.entered, self.other_done = threading.Event(), threading.Event()
        self.other_finished_meanwhile = False

    def find(self) -> Discovery:
        self.entered.set()
        self.other_finished_meanwhile = self.other_done.wait(10)  # a hang guard, not a timing
        return self.inner.find()


async def last(agent: Agent, prompt: str) -> RunResult:
    async for event in run_stream(agent, prompt):
        if event.type == "done":
            return event.result
    raise AssertionError("no done event")


def test_a_hung_skills_folder_holds_up_its_own_run_not_the_others(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "deploy")
    mount = HungMount(tmp_path / "skills")
    slow = Agent(FunctionModel(lambda m, r: "deployed"), extensions=[Skills(mount)])
    other = Agent(FunctionModel(lambda m, r: "hello"))

    async def both() -> tuple[RunResult, RunResult]:
        async def after_the_search_began() -> RunResult:
            await asyncio.get_running_loop().run_in_executor(None, mount.entered.wait, 10)
            result = await last(other, "hi")
            mount.other_done.set()
            return result

        return await asyncio.gather(last(slow, "deploy it"), after_the_search_began())

    first, second = asyncio.run(both())

    assert second.status == "completed" and second.output == "hello"
    assert mount.other_finished_meanwhile, "the other run waited for the skills search"
    assert first.status == "completed" and first.output == "deployed"


def test_the_index_is_the_one_found_as_the_run_started(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "deploy", description="Deploys the shop.")
    seen: list[str] = []
    agent = Agent(
        FunctionModel(lambda m, r: seen.append(r.system or "") or "ok"),
        extensions=[Skills(SkillFolders([SkillRoot(tmp_path / "skills", "user")]))],
    )

    async def go() -> RunResult:
        return await last(agent, "hi")

    assert asyncio.run(go()).status == "completed"
    assert "- deploy: Deploys the shop." in seen[0]
