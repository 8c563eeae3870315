"""History checkpoints: past a token budget, a summary the model writes replaces earlier turns.

Before each model call, the context's history (the earlier turns as the model would see them)
and the current turn are counted with `count_message_tokens`. When they exceed
`variant.context.history_token_budget`, a separate model call (no tools) reads the earlier
turns and writes a checkpoint: the requests, the decisions, the results, the open items. From
then on the model gets one message, `[Checkpoint of the earlier conversation]` and the
checkpoint, in place of the messages it covers, followed by the messages after them. A later
checkpoint covers the earlier one too (the model rewrites it with what came after).

Only earlier turns are ever replaced: the current turn reaches the model whole. The replaced
messages stay in `session.history`, in the turn results and in the trace; only the context
drops them. The checkpoint call is an LLM span of the turn (iteration 0: not one of the turn's
calls) and a `checkpoint` event. A failed call (a `ModelError` or an empty answer) is logged
and recorded as a `checkpoint` event, and the run goes on with the history as it was; it is
tried again once the history has grown (after the next turn), not on every call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from plangate.harness._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from plangate.harness._turn import Turn
from plangate.harness.features._feature import Feature, SessionView
from plangate.harness.models import ModelError, count_message_tokens, count_tokens

logger = logging.getLogger("plangate.checkpoints")

CHECKPOINT_HEADER = "[Checkpoint of the earlier conversation]"
"""First line of the message that stands for the replaced history."""
MAX_MESSAGE_CHARS = 4_000
"""Longest text of one message in the transcript the checkpoint model reads."""

CHECKPOINT_PROMPT = """\
You write checkpoints of a conversation between a user and an assistant that uses tools. The \
checkpoint replaces the conversation so far in the assistant's context, so the assistant must \
be able to go on from it alone.

Write a concise checkpoint in plain text with these parts:
- Requests: what the user asked for, in their own terms, with every constraint and detail \
that still matters.
- Decisions: what was decided or agreed, and why.
- Results: what was done and found (names, ids, numbers, file names, reference ids such as \
ref-1), what worked and what failed.
- Open items: what is not done yet, and what the user is waiting for.

Keep facts exact; do not invent anything; leave out small talk and repetition. Answer with the \
checkpoint only."""


class Checkpoints(Feature):
    """Replaces earlier turns in the context by a model-written checkpoint past a budget."""

    name = "checkpoints"

    def __init__(self, session: SessionView) -> None:
        super().__init__(session)
        self.budget = session.variant.context.history_token_budget
        self.text = ""
        """The checkpoint (empty: none yet)."""
        self.covered = 0
        """How many messages of `session.history`, from the start, the checkpoint replaces."""
        self._failed_at = -1

    def history(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The checkpoint message, then the messages it does not cover.

        `messages` is `session.history` as the loop passes it (no other feature rewrites it).
        """
        if not self.text:
            return messages
        return [checkpoint_message(self.text), *messages[self.covered :]]

    async def before_model(self, turn: Turn) -> None:
        """Write a checkpoint when the history and the turn exceed the budget."""
        history = self.session.history
        if len(history) <= self.covered or len(history) == self._failed_at:
            return  # nothing new to replace (the current turn is never replaced)
        context = self.history(history)
        tokens = count_message_tokens(context) + count_message_tokens(turn.messages)
        if tokens > self.budget:
            await self._checkpoint(turn, context, tokens)

    def state(self) -> dict[str, Any]:
        """The checkpoint and how many history messages it covers."""
        return {"text": self.text, "covered": self.covered}

    def restore(self, state: dict[str, Any]) -> None:
        """Load a saved checkpoint."""
        self.text = state.get("text", "")
        self.covered = min(state.get("covered", 0), len(self.session.history))

    async def _checkpoint(self, turn: Turn, context: Sequence[Message], tokens: int) -> None:
        covering = len(self.session.history)
        replaced = count_message_tokens(context)
        try:
            text = (await self._ask(turn, context)).strip()
        except ModelError as exc:
            self._fail(covering, f"the model call failed ({exc})")
            return
        if not text:
            self._fail(covering, "the model wrote no text")
            return
        newly = covering - self.covered
        written = count_tokens(text)
        after = tokens - replaced + count_message_tokens([checkpoint_message(text)])
        self.text, self.covered = text, covering
        earlier = " and the earlier checkpoint" if len(context) > newly else ""
        self.session.emit(
            "checkpoint",
            f"replaced {newly} message{'s' if newly != 1 else ''} of earlier turns{earlier} "
            f"({replaced:,} tokens) by a checkpoint of {written:,} tokens; history and turn: "
            f"{tokens:,} → {after:,} tokens (budget {self.budget:,})",
        )

    async def _ask(self, turn: Turn, context: Sequence[Message]) -> str:
        messages: list[Message] = [
            SystemMessage(content=CHECKPOINT_PROMPT),
            UserMessage(
                content=(
                    f"The conversation so far:\n<conversation>\n{transcript(context)}\n"
                    "</conversation>\n\nWrite the checkpoint."
                )
            ),
        ]
        response = await self.session.side_request(messages)
        turn.usage = turn.usage + response.usage
        return response.message.content

    def _fail(self, covering: int, why: str) -> None:
        self._failed_at = covering
        detail = f"failed: {why}; the history is kept as it was"
        logger.warning("checkpoint of session %s %s", self.session.session_id, detail)
        self.session.emit("checkpoint", detail)


def checkpoint_message(text: str) -> UserMessage:
    """The message that stands for the history a checkpoint replaces."""
    return UserMessage(content=f"{CHECKPOINT_HEADER}\n{text}")


def transcript(messages: Sequence[Message]) -> str:
    """The messages as plain text for the checkpoint model; long texts are cut."""
    return "\n\n".join(_line(message) for message in messages)


def _line(message: Message) -> str:
    if isinstance(message, ToolMessage):
        status = " (error)" if message.is_error else ""
        return f"[tool result of {message.name}{status}]\n{_cut(message.content)}"
    if isinstance(message, AssistantMessage):
        calls = "".join(f"\n[called {c.name}({_cut(c.arguments)})]" for c in message.tool_calls)
        return f"[assistant]\n{_cut(message.content)}{calls}".rstrip()
    return f"[{message.role}]\n{_cut(message.content)}"


def _cut(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return f"{text[:MAX_MESSAGE_CHARS]}…[{len(text) - MAX_MESSAGE_CHARS:,} more characters]"
