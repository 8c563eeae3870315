"""One vocabulary: the names plangate writes are the conventions' own, and its tools' own."""

from __future__ import annotations

import pytest
from openinference.semconv.resource import ResourceAttributes
from openinference.semconv.trace import (
    MessageAttributes,
    OpenInferenceMimeTypeValues,
    SpanAttributes,
    ToolAttributes,
    ToolCallAttributes,
)

from plangate.harness import FINISH, Agent, ScriptedModel, load_variant, semconv
from plangate.harness.plans import (
    DEPENDENCY_TOOLS,
    PLAN_TOOLS,
    TODO_TOOLS,
    DependencyPlan,
    TodoList,
    dependency_tools,
    todo_tools,
)
from plangate.replay import schema

OPENINFERENCE = {
    "SPAN_KIND": SpanAttributes.OPENINFERENCE_SPAN_KIND,
    "SESSION_ID": SpanAttributes.SESSION_ID,
    "USER_ID": SpanAttributes.USER_ID,
    "METADATA": SpanAttributes.METADATA,
    "TAGS": SpanAttributes.TAG_TAGS,
    "AGENT_NAME": SpanAttributes.AGENT_NAME,
    "INPUT_VALUE": SpanAttributes.INPUT_VALUE,
    "INPUT_MIME_TYPE": SpanAttributes.INPUT_MIME_TYPE,
    "OUTPUT_VALUE": SpanAttributes.OUTPUT_VALUE,
    "OUTPUT_MIME_TYPE": SpanAttributes.OUTPUT_MIME_TYPE,
    "LLM_MODEL_NAME": SpanAttributes.LLM_MODEL_NAME,
    "LLM_INPUT_MESSAGES": SpanAttributes.LLM_INPUT_MESSAGES,
    "LLM_OUTPUT_MESSAGES": SpanAttributes.LLM_OUTPUT_MESSAGES,
    "LLM_TOOLS": SpanAttributes.LLM_TOOLS,
    "LLM_FINISH_REASON": SpanAttributes.LLM_FINISH_REASON,
    "LLM_PROMPT_TEMPLATE_VARIABLES": SpanAttributes.LLM_PROMPT_TEMPLATE_VARIABLES,
    "TOKENS_PROMPT": SpanAttributes.LLM_TOKEN_COUNT_PROMPT,
    "TOKENS_COMPLETION": SpanAttributes.LLM_TOKEN_COUNT_COMPLETION,
    "TOKENS_TOTAL": SpanAttributes.LLM_TOKEN_COUNT_TOTAL,
    "TOOL_NAME": SpanAttributes.TOOL_NAME,
    "TOOL_ID": SpanAttributes.TOOL_ID,
    "TOOL_PARAMETERS": SpanAttributes.TOOL_PARAMETERS,
    "MESSAGE_ROLE": MessageAttributes.MESSAGE_ROLE,
    "MESSAGE_CONTENT": MessageAttributes.MESSAGE_CONTENT,
    "MESSAGE_NAME": MessageAttributes.MESSAGE_NAME,
    "MESSAGE_TOOL_CALL_ID": MessageAttributes.MESSAGE_TOOL_CALL_ID,
    "MESSAGE_TOOL_CALLS": MessageAttributes.MESSAGE_TOOL_CALLS,
    "TOOL_CALL_ID": ToolCallAttributes.TOOL_CALL_ID,
    "TOOL_CALL_FUNCTION_NAME": ToolCallAttributes.TOOL_CALL_FUNCTION_NAME,
    "TOOL_CALL_FUNCTION_ARGUMENTS": ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON,
    "TOOL_JSON_SCHEMA": ToolAttributes.TOOL_JSON_SCHEMA,
    "PROJECT_NAME": ResourceAttributes.PROJECT_NAME,
    "MIME_JSON": OpenInferenceMimeTypeValues.JSON.value,
    "MIME_TEXT": OpenInferenceMimeTypeValues.TEXT.value,
}


@pytest.mark.parametrize("name", sorted(OPENINFERENCE))
def test_openinference_names_are_the_conventions(name: str) -> None:
    assert getattr(semconv, name) == OPENINFERENCE[name]


def test_plangate_s_own_names_sit_under_plangate() -> None:
    names = [n for n in vars(semconv) if n.isupper() and not n.endswith("_NAME")]
    own = [n for n in names if n not in OPENINFERENCE and "SPAN" not in n]
    assert own and all(getattr(semconv, n).startswith("plangate.") for n in own)


def test_the_plan_tool_names_are_the_tools_names() -> None:
    todo = [t.name for t in todo_tools(TodoList("four"), show_plan=False)]
    dependency = [t.name for t in dependency_tools(DependencyPlan(), show_plan=False)]
    assert tuple(todo) == TODO_TOOLS
    assert tuple(dependency) == DEPENDENCY_TOOLS
    assert {*TODO_TOOLS, *DEPENDENCY_TOOLS} == PLAN_TOOLS
    assert schema.PLAN_TOOLS == PLAN_TOOLS and {FINISH} == schema.CONTROL_TOOLS


def test_the_finish_tool_is_called_finish() -> None:
    agent = Agent(model=ScriptedModel([]), variant=load_variant("alyx"))
    session = agent.session("vocabulary")
    assert session._finish.name == FINISH
