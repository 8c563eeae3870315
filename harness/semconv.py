"""The names on plangate's spans: OpenInference's attributes, plangate's own, and the span names.

Defined here once: the harness writes them, the trace table's span reader (`plangate.replay`)
and the Phoenix code (`plangate.ci.phoenix`) read them. The OpenInference names follow its
semantic conventions (`openinference.semconv.trace.SpanAttributes`; a test holds them against
that package); plangate's own names sit under `plangate.`.
"""

from __future__ import annotations

from typing import Final

# -- OpenInference: span attributes -------------------------------------------------------------
SPAN_KIND = "openinference.span.kind"
"""AGENT, LLM, TOOL, CHAIN, …"""
SESSION_ID = "session.id"
USER_ID = "user.id"
METADATA = "metadata"
"""JSON object; plangate's carries the variant and the session's metadata."""
TAGS = "tag.tags"
AGENT_NAME = "agent.name"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
LLM_MODEL_NAME = "llm.model_name"
LLM_INPUT_MESSAGES = "llm.input_messages"
LLM_OUTPUT_MESSAGES = "llm.output_messages"
LLM_TOOLS = "llm.tools"
LLM_FINISH_REASON = "llm.finish_reason"
LLM_PROMPT_TEMPLATE_VARIABLES = "llm.prompt_template.variables"
TOKENS_PROMPT = "llm.token_count.prompt"
TOKENS_COMPLETION = "llm.token_count.completion"
TOKENS_TOTAL = "llm.token_count.total"
TOOL_NAME = "tool.name"
TOOL_ID = "tool.id"
TOOL_PARAMETERS = "tool.parameters"
"""The tool's JSON schema (a call's arguments go in `input.value`)."""

# -- OpenInference: the parts of a flattened message (`llm.input_messages.N.<part>`) ----------
MESSAGE_ROLE = "message.role"
MESSAGE_CONTENT = "message.content"
MESSAGE_NAME = "message.name"
MESSAGE_TOOL_CALL_ID = "message.tool_call_id"
MESSAGE_TOOL_CALLS = "message.tool_calls"
"""Then `.N.` and a tool call's part."""
TOOL_CALL_ID = "tool_call.id"
TOOL_CALL_FUNCTION_NAME = "tool_call.function.name"
TOOL_CALL_FUNCTION_ARGUMENTS = "tool_call.function.arguments"
TOOL_JSON_SCHEMA = "tool.json_schema"
"""Of `llm.tools.N`: a tool offered on an LLM call, as its JSON schema."""

# -- OpenInference: resource attributes and values ----------------------------------------------
PROJECT_NAME = "openinference.project.name"
"""Resource attribute: the Phoenix project spans go to."""
MIME_JSON = "application/json"
MIME_TEXT = "text/plain"

# -- plangate's own attributes ------------------------------------------------------------------
TURN_INDEX = "plangate.turn_index"
"""On AGENT spans (and the spans a turn's features make): the turn's number in its session."""
ITERATION = "plangate.iteration"
"""On LLM and TOOL spans and on events: the model call number within the turn."""
ITERATIONS = "plangate.iterations"
"""On AGENT spans: model calls the turn made."""
STOP_REASON = "plangate.stop_reason"
"""On AGENT spans: why the turn ended."""
PLAN = "plangate.plan"
"""On TOOL spans whose call changed the plan: the plan's JSON snapshot after it."""
DETAIL = "plangate.detail"
"""On the AGENT span's events: what the harness noticed or did (the bounced items, the loop)."""
ORIGINAL_SESSION_ID = "plangate.session_id"
"""On spans sent to Phoenix: the session id before it was namespaced."""
TRIAL = "plangate.trial"
"""Read, never written: the repeat number, on another agent's spans (as is `metadata`'s `trial`)."""

# -- OpenTelemetry GenAI conventions and pydantic-ai's instrumentation: read, never written ------


class GenAI:
    """The OpenTelemetry GenAI semantic conventions' names that the trace table reads.

    As `opentelemetry.semconv._incubating.attributes.gen_ai_attributes` defines them (and the
    conventions' `docs/gen-ai/gen-ai-spans.md`, `gen-ai-agent-spans.md`). A namespace, so
    that this module's bare names stay OpenInference's and plangate's own.
    """

    OPERATION_NAME: Final = "gen_ai.operation.name"
    """Which operation a span is: one of the values below, or the system's own."""
    CONVERSATION_ID: Final = "gen_ai.conversation.id"
    AGENT_NAME: Final = "gen_ai.agent.name"
    REQUEST_MODEL: Final = "gen_ai.request.model"
    RESPONSE_MODEL: Final = "gen_ai.response.model"
    USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
    USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
    USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
    """Deprecated for `gen_ai.usage.input_tokens`; older instrumentations write it."""
    USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
    """Deprecated for `gen_ai.usage.output_tokens`."""
    TOOL_NAME: Final = "gen_ai.tool.name"
    TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
    TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
    """The call's arguments: an object, or its JSON text."""
    TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
    INPUT_MESSAGES: Final = "gen_ai.input.messages"
    """The chat history sent to the model: structured, or its JSON text."""
    OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
    SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
    """The instructions sent apart from the chat history (a list of parts)."""
    TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
    """The tools offered to the model (a list of `{type, name, description, parameters}`)."""

    # values of `gen_ai.operation.name`
    CHAT: Final = "chat"
    TEXT_COMPLETION: Final = "text_completion"
    GENERATE_CONTENT: Final = "generate_content"
    EMBEDDINGS: Final = "embeddings"
    RETRIEVAL: Final = "retrieval"
    EXECUTE_TOOL: Final = "execute_tool"
    CREATE_AGENT: Final = "create_agent"
    INVOKE_AGENT: Final = "invoke_agent"
    INVOKE_WORKFLOW: Final = "invoke_workflow"


class PydanticAI:
    """pydantic-ai's own names (instrumentation versions 1 and 2, `_instrumentation.py`).

    Its tool spans carry `gen_ai.tool.name` and `gen_ai.tool.call.id` but no operation name;
    versions 3 and later use the GenAI names instead of the arguments and result below.
    """

    AGENT_RUN_SPAN: Final = "agent run"
    TOOL_SPAN: Final = "running tool"
    TOOL_ARGUMENTS: Final = "tool_arguments"
    TOOL_RESPONSE: Final = "tool_response"
    FINAL_RESULT: Final = "final_result"
    """On the agent run span: the run's output."""
    REQUEST_PARAMETERS: Final = "model_request_parameters"
    """On a model request span: its parameters, `instruction_parts` among them."""


# -- span names ---------------------------------------------------------------------------------
AGENT_SPAN_NAME = "agent.turn"
LLM_SPAN_NAME = "llm.call"
TOOL_SPAN_PREFIX = "tool."
"""A TOOL span is named `tool.<name>`."""
MEMORY_SPAN_NAME = "memory.update"
