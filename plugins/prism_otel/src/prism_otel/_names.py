"""Span names, attribute keys and event names: the GenAI semantic conventions plus ``prism.*``.

The ``gen_ai.*`` keys follow the OpenTelemetry GenAI semantic conventions (agent, inference and
tool-execution spans); what those conventions do not name (checkpoints, suspension, guardrail
decisions, the run's status) lives under ``prism.*``.
"""

from __future__ import annotations

__all__ = (
    "AGENT_DESCRIPTION",
    "AGENT_ID",
    "AGENT_NAME",
    "AGENT_VERSION",
    "CONTENT_ENV",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "EVENT_CHECKPOINT",
    "EVENT_GUARDRAIL",
    "EVENT_RESUMED",
    "EVENT_RETRY",
    "EVENT_SUSPENDED",
    "FINISH_REASONS",
    "INPUT_TOKENS",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "OUTPUT_TOKENS",
    "PROVIDER_NAME",
    "REQUEST_MODEL",
    "REQUEST_STREAM",
    "RESPONSE_FINISH_REASONS",
    "RUN_ID",
    "RUN_STATUS",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_OUTCOME",
    "TOOL_RESULT",
    "TOOL_TYPE",
    "TRACER_NAME",
)

TRACER_NAME = "prism_otel"

#: The environment variable the GenAI instrumentations use to opt into content capture.
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

OPERATION = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_VERSION = "gen_ai.agent.version"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

RUN_ID = "prism.run.id"
RUN_STATUS = "prism.run.status"
TOOL_OUTCOME = "prism.tool.outcome"

EVENT_SUSPENDED = "prism.run.suspended"
EVENT_RESUMED = "prism.run.resumed"
EVENT_GUARDRAIL = "prism.guardrail.decision"
EVENT_CHECKPOINT = "prism.checkpoint.write"
EVENT_RETRY = "prism.provider.retry"

#: Prism's finish reasons (``ProviderDone.finish_reason``) → the conventions' well-known
#: ``gen_ai.response.finish_reasons`` values; any other value is reported as it is.
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_call",
    "content_filter": "content_filter",
    "error": "error",
}
