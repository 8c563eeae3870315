"""Skills: instructions plus tools that the model loads on demand with `load_skill`.

The system prompt never changes: the skills on offer (names and one-line descriptions) are
listed in the description of `load_skill`. Loading a skill returns its instructions as the
tool result and offers its tools from the next model call on, for the rest of the session (the
loaded names are saved with the session).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plangate.harness._errors import ConfigError
from plangate.harness._tools import Tool, ToolRetry, tool
from plangate.harness._turn import Turn
from plangate.harness.features._feature import Feature, SessionView

logger = logging.getLogger("plangate.skills")

LOAD_SKILL = "load_skill"


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """Instructions and tools for one kind of job, loaded only when the model asks for them."""

    name: str
    """What the model passes to `load_skill`."""
    description: str
    """One line: when the skill helps (listed in `load_skill`'s description)."""
    instructions: str
    """How to do the job; the result of `load_skill`."""
    tools: tuple[Tool, ...] = ()
    """Tools offered once the skill is loaded."""


class Skills(Feature):
    """Offers `load_skill`; offers each loaded skill's tools."""

    name = "skills"

    def __init__(self, session: SessionView, skills: Sequence[Any]) -> None:
        super().__init__(session)
        self.skills: dict[str, Skill] = _index(skills)
        self.loaded: list[str] = []
        """Names of the loaded skills, in the order they were loaded."""
        self._turn: Turn | None = None
        self._load = self._load_tool()

    def tools(self, turn: Turn) -> list[Tool]:
        """`load_skill`, then the tools of the loaded skills (each name once)."""
        offered: dict[str, Tool] = {}
        for name in self.loaded:
            for found in self.skills[name].tools:
                offered.setdefault(found.name, found)
        return [self._load, *offered.values()] if self.skills else []

    async def before_model(self, turn: Turn) -> None:
        """Remember the running turn, for the `skill_loaded` event."""
        self._turn = turn

    def load(self, name: str) -> str:
        """Load a skill by name; the text is what the model sees.

        Raises:
            ToolRetry: No skill has that name; the message lists the choices.
        """
        skill = self.skills.get(name)
        if skill is None:
            choices = ", ".join(repr(n) for n in self.skills)
            raise ToolRetry(
                f"Unknown skill {name!r}. Available skills: {choices}. Load one of them."
            )
        if name in self.loaded:
            return (
                f"Skill {name!r} is already loaded: its tools are offered, and its instructions "
                "came with the first load_skill result."
            )
        self.loaded.append(name)
        names = ", ".join(t.name for t in skill.tools)
        offered = f" Its tools ({names}) are offered from your next call on." if names else ""
        self.session.emit("skill_loaded", name)
        return f"Skill {name!r} loaded.{offered}\n\n{skill.instructions}"

    def _load_tool(self) -> Tool:
        listed = "\n".join(f"- {s.name}: {s.description}" for s in self.skills.values())

        def load_skill(name: str) -> str:
            """Load a skill.

            Args:
                name: The skill's name, as listed.
            """
            return self.load(name)

        description = (
            "Load a skill when the task needs it: you get its instructions, and its tools from "
            f"your next call on. Skills:\n{listed}"
        )
        return tool(description=description)(load_skill)

    def state(self) -> dict[str, Any]:
        """The loaded skills' names."""
        return {"loaded": list(self.loaded)}

    def restore(self, state: dict[str, Any]) -> None:
        """Load the saved skills again; a skill the agent no longer has is dropped."""
        names = state.get("loaded", [])
        gone = [n for n in names if n not in self.skills]
        if gone:
            logger.warning("saved skills no longer offered, not loaded: %s", ", ".join(gone))
        self.loaded = [n for n in names if n in self.skills]


def _index(skills: Sequence[Any]) -> dict[str, Skill]:
    """The agent's skills by name; checks types, names and tool names."""
    index: dict[str, Skill] = {}
    tools: dict[str, Tool] = {}
    for skill in skills:
        if not isinstance(skill, Skill):
            raise ConfigError(f"Agent.skills holds {skill!r}; every entry must be a Skill")
        if skill.name in index:
            raise ConfigError(f"two skills are named {skill.name!r}; skill names must be unique")
        index[skill.name] = skill
        for found in skill.tools:
            if tools.setdefault(found.name, found) is not found or found.name == LOAD_SKILL:
                raise ConfigError(
                    f"skill {skill.name!r}: tool name {found.name!r} is taken by another tool; "
                    "rename one of them"
                )
    return index
