"""Tool schemas: draft 2020-12 validation, refusal of invalid schemas, edits and answers."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentDecisionError,
    JsonSchemaError,
    ToolDefinition,
    ToolDefinitionError,
    ToolExecutionContext,
    create_tool_registry,
    dispatch_tool_call,
    resume_agent_run,
    tool_call_content,
)
from prism_core.schema import compile_json_schema, validate_json_schema

from .durable_support import World
from .helpers import echo_tool, text_turn, tool_turn

SECRET = "hunter2-do-not-echo"


def ctx(name: str = "t") -> ToolExecutionContext:
    """A tool context outside any run."""
    return ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1", tool_name=name)


def ref(result: Any) -> dict[str, str]:
    """The run reference of ``result``."""
    return {"run_id": result.run_id, "session_id": result.session_id}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objekt"},
        {"type": "object", "properties": {"n": {"type": "integr"}}},
        {"type": "string", "pattern": "(unclosed"},
        {"type": "object", "required": "name"},
        {"minLength": -1},
    ],
)
def test_an_invalid_schema_is_refused_when_the_tool_is_defined(schema: dict[str, Any]) -> None:
    """A malformed schema fails at definition with a typed error naming the tool."""
    with pytest.raises(JsonSchemaError, match="tool 't' parameters") as info:
        ToolDefinition("t", lambda a, c: 1, parameters=schema)
    assert info.value.code == "ERR_PRISM_SCHEMA_INVALID"
    with pytest.raises(JsonSchemaError, match="tool 't' elicitation"):
        ToolDefinition("t", lambda a, c: 1, elicitation=schema)


CASES: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]] = [
    (
        {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer"}, {"const": "x"}]}}},
        {"v": 3},
        {"v": SECRET},
        "$.v",
    ),
    (
        {"type": "object", "properties": {"v": {"oneOf": [{"type": "string"}, {"minLength": 3}]}}},
        {"v": "ab"},
        {"v": SECRET},
        "$.v",
    ),
    (
        {
            "type": "object",
            "properties": {"v": {"allOf": [{"type": "string"}, {"maxLength": 5}]}},
        },
        {"v": "abc"},
        {"v": SECRET},
        "$.v",
    ),
    (
        {"type": "object", "properties": {"v": {"not": {"const": SECRET}}}},
        {"v": "fine"},
        {"v": SECRET},
        "$.v",
    ),
    (
        {
            "$defs": {"path": {"type": "string", "pattern": "^/srv/"}},
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/path"}},
        },
        {"p": "/srv/data"},
        {"p": f"/etc/{SECRET}"},
        "$.p",
    ),
    (
        {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}},
        {"to": "ops@example.com"},
        {"to": SECRET},
        "$.to",
    ),
    (
        {"type": "object", "properties": {"mode": {"const": "read"}}},
        {"mode": "read"},
        {"mode": SECRET},
        "$.mode",
    ),
    (
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        {"n": 2},
        {"n": 0},
        "$.n",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("schema", "good", "bad", "path"), CASES)
async def test_draft_2020_12_keywords_are_enforced_without_echoing_the_value(
    schema: dict[str, Any], good: dict[str, Any], bad: dict[str, Any], path: str
) -> None:
    """anyOf/oneOf/allOf/not/$ref/$defs/pattern/format/const block the call with
    invalid_arguments; the message names the path and keyword but not the value."""
    runs: list[Any] = []
    tool = ToolDefinition("t", lambda a, c: runs.append(a) or "ran", parameters=schema)
    registry = create_tool_registry([tool])
    ok = await dispatch_tool_call(
        tool_call_content("c1", "t", good), registry=registry, context=ctx()
    )
    assert ok.error is None
    assert ok.value == "ran"
    blocked = await dispatch_tool_call(
        tool_call_content("c1", "t", bad), registry=registry, context=ctx()
    )
    assert blocked.error is not None
    assert blocked.error.code == "invalid_arguments"
    assert blocked.error.message.startswith(f"Invalid arguments for t: {path}: ")
    assert SECRET not in blocked.error.message
    assert blocked.error.message.endswith(")")
    assert runs == [good]


def test_problem_names_the_failing_keyword_and_path() -> None:
    """The description carries the JSON path and the keyword that failed."""
    schema = compile_json_schema(
        {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "integer"}},
                "mode": {"type": "integer"},
            },
            "required": ["items", "mode"],
            "additionalProperties": False,
        }
    )
    assert schema.problem({"items": [1, 2]}) == "$: missing required property 'mode' (required)"
    assert schema.problem({"items": [1, "x"], "mode": 1}) == "$.items[1]: expected integer (type)"
    assert schema.problem({"items": [], "mode": 1, "extra": 1}) == (
        "$: has a property the schema does not allow: 'extra' (additionalProperties)"
    )
    assert schema.problem({"items": [], "mode": 1}) is None
    closed = compile_json_schema({"properties": {"x": False}})
    problem = closed.problem({"x": SECRET})
    assert problem is not None
    assert problem.endswith("does not satisfy the schema (false)")
    assert SECRET not in problem


def test_an_unresolvable_reference_fails_closed() -> None:
    """A $ref that cannot be resolved blocks (no network fetch, no exception)."""
    problem = validate_json_schema(
        {"properties": {"a": {"$ref": "https://example.invalid/schema.json"}}}, {"a": 1}
    )
    assert problem is not None
    assert "cannot be resolved" in problem


def test_validate_json_schema_treats_an_invalid_schema_as_a_problem() -> None:
    """A stored schema that is malformed validates nothing."""
    problem = validate_json_schema({"type": "objekt"}, {})
    assert problem is not None
    assert "not a valid JSON schema" in problem
    assert validate_json_schema(None, {"anything": 1}) is None


def test_the_compiled_validator_is_cached_on_the_definition() -> None:
    """The schema is compiled once, when the tool is defined."""
    tool = ToolDefinition("t", lambda a, c: 1, parameters={"type": "object"})
    first = tool._parameters_schema
    assert first is not None
    assert tool.check_arguments({}) is None
    assert tool.check_arguments([]) == "$: expected object (type)"
    assert tool._parameters_schema is first


@pytest.mark.parametrize(
    "execute",
    [lambda args: 1, lambda: 1, lambda args, context, extra: 1, lambda *, args, context: 1],
)
def test_execute_must_accept_args_and_context(execute: Any) -> None:
    """A callable that cannot take (args, context) positionally is refused at definition."""
    with pytest.raises(ToolDefinitionError, match="execute must accept") as info:
        ToolDefinition("t", execute)
    assert info.value.code == "ERR_PRISM_TOOL_DEFINITION"


def test_flexible_callables_are_accepted() -> None:
    """Defaults, *args and callable objects that take two positionals are fine."""

    class Tool:
        def __call__(self, args: Any, context: Any) -> int:
            return 1

    for execute in (lambda a, c, extra=None: 1, lambda *a: 1, Tool()):
        assert ToolDefinition("t", execute).name == "t"


@pytest.mark.anyio
async def test_a_tool_exception_reaches_the_model_bounded_and_redacted() -> None:
    """The message is bounded and redacted, and carries no traceback."""
    from prism_core import create_secret_redactor
    from prism_core.tools import MAX_TOOL_ERROR_CHARS, run_tool_call

    def boom(args: Any, context: Any) -> Any:
        raise RuntimeError(f"token {SECRET} " + "x" * 2000)

    registry = create_tool_registry([ToolDefinition("t", boom)])
    outcome = await run_tool_call(
        tool_call_content("c1", "t", {}),
        registry=registry,
        context=ctx(),
        redactor=create_secret_redactor([SECRET]),
    )
    assert outcome.status == "failed"
    assert outcome.result.error is not None
    message = outcome.result.error.message
    assert message.startswith("token [REDACTED] xxx")
    assert len(message) == MAX_TOOL_ERROR_CHARS
    assert SECRET not in message
    assert "Traceback" not in message
    assert isinstance(outcome.exception, RuntimeError)


@pytest.mark.anyio
async def test_approval_edits_are_checked_with_the_full_schema() -> None:
    """modified_arguments that break a pattern are refused before anything is written."""
    world, log = World(), []
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "pattern": "^/srv/"}},
        "required": ["path"],
    }
    turns = [tool_turn(("c1", "echo", {"path": "/srv/a"})), text_turn("done")]
    config = {"tools": [echo_tool(log=log, parameters=schema)]}
    result = (
        await world.agent(turns, **config)
        .create_session(id="s1")
        .run("go", run_state=world.run_state(interrupt_before_tool=True))
    )
    (decision,) = result.interruption.pending_decisions
    before = await world.checkpoints.raw(result.run_id)
    edit = {"path": f"/etc/{SECRET}"}
    with pytest.raises(
        AgentDecisionError, match="Modified arguments failed schema validation"
    ) as info:
        await resume_agent_run(
            world.agent(turns, **config),
            ref(result),
            {
                "expected_version": 1,
                "decisions": [
                    {
                        "approval_id": decision.approval_id,
                        "outcome": "allow_once",
                        "modified_arguments": edit,
                    }
                ],
            },
            **world.resume_options(),
        )
    assert SECRET not in str(info.value)
    # What the schema found (path and keyword, never the value) rides the error's notes.
    assert any("$.path: does not match" in note for note in info.value.__notes__)
    assert not any(SECRET in note for note in info.value.__notes__)
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []


@pytest.mark.anyio
async def test_elicitation_answers_are_checked_with_the_full_schema() -> None:
    """An answer outside a oneOf is refused; a valid one resumes the run."""
    world = World()
    schema = {
        "type": "object",
        "properties": {"choice": {"oneOf": [{"const": "yes"}, {"const": "no"}]}},
        "required": ["choice"],
    }
    ask = ToolDefinition("ask_user", lambda a, c: "unused", elicitation=schema)
    turns = [tool_turn(("c1", "ask_user", {"q": "ok?"})), text_turn("thanks")]
    result = (
        await world.agent(turns, tools=[ask])
        .create_session(id="s1")
        .run("go", run_state=world.run_state())
    )
    (decision,) = result.interruption.pending_decisions

    async def answer(value: dict[str, Any]) -> Any:
        return await resume_agent_run(
            world.agent(turns, tools=[ask]),
            ref(result),
            {
                "expected_version": 1,
                "decisions": [
                    {
                        "approval_id": decision.approval_id,
                        "outcome": "allow_once",
                        "elicitation": value,
                    }
                ],
            },
            **world.resume_options(),
        )

    with pytest.raises(AgentDecisionError, match=r"\$\.choice: matches not exactly one"):
        await answer({"choice": "maybe"})
    assert (await answer({"choice": "yes"})).status == "succeeded"


@pytest.mark.anyio
async def test_refusals_and_tool_errors_are_logged_without_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """prism_core.tools warns about a blocked call and a raising tool; neither record holds
    an argument value or the exception message."""
    import logging

    def boom(args: Any, context: Any) -> Any:
        raise RuntimeError(f"failed with {SECRET}")

    registry = create_tool_registry(
        [
            ToolDefinition(
                "typed", lambda a, c: 1, parameters={"type": "object", "maxProperties": 0}
            ),
            ToolDefinition("boom", boom),
        ]
    )
    with caplog.at_level(logging.DEBUG, logger="prism_core.tools"):
        await dispatch_tool_call(
            tool_call_content("c1", "typed", {"k": SECRET}), registry=registry, context=ctx()
        )
        await dispatch_tool_call(
            tool_call_content("c2", "boom", {}), registry=registry, context=ctx()
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "tool call c1 (typed) blocked: invalid_arguments",
        "tool boom (call c2) raised RuntimeError",
    ]
    assert all(r.name == "prism_core.tools" for r in caplog.records)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_identical_schemas_share_one_compiled_validator() -> None:
    """Rebuilding an agent's tools does not re-check the same schema against the metaschema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    first = ToolDefinition("a", lambda a, c: 1, parameters=schema)
    second = ToolDefinition("b", lambda a, c: 1, parameters=dict(schema))
    assert first._parameters_schema is second._parameters_schema
    with pytest.raises(JsonSchemaError, match="tool 'c' parameters is not JSON"):
        ToolDefinition("c", lambda a, c: 1, parameters={"n": float("nan")})
