"""Typed output: ``output_type=`` on the agent and per run, ``result.output``, retries with the
validation errors, ``OutputValidationError``, the schema in the provider request, and the
output riding the terminal checkpoint of a durable run."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import attrs
import pydantic
import pytest

from prism_core import (
    AgentConfigError,
    AgentRunError,
    InvalidOptionsError,
    JsonSchemaError,
    OutputValidationError,
    ProviderOutputSpec,
    ProviderRequest,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    load_agent_run_state,
    provider_done,
    provider_text_delta,
    resume_agent_run,
)

from ..durable_support import World
from ..helpers import MODEL, text_turn, tool_turn

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
    "required": ["city", "temperature"],
    "additionalProperties": False,
}
GOOD = '{"city": "Paris", "temperature": 21.5}'


@dataclasses.dataclass
class WeatherDC:
    """The weather in one city."""

    city: str
    temperature: float


@attrs.frozen
class WeatherAttrs:
    """The weather in one city."""

    city: str
    temperature: float


class WeatherTD(TypedDict):
    """The weather in one city."""

    city: str
    temperature: float


class WeatherModel(pydantic.BaseModel):
    """The weather in one city."""

    city: str
    temperature: float


class Recorder:
    """A provider answering ``answers`` in order (the last repeats), recording each request."""

    def __init__(self, *answers: str) -> None:
        self.answers = answers
        self.requests: list[ProviderRequest] = []

    def provider(self) -> Any:
        def events(request: ProviderRequest) -> list[Any]:
            self.requests.append(request)
            answer = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
            return [provider_text_delta(answer), provider_done()]

        return create_mock_provider(events)


def agent_with(recorder: Recorder, **config: Any) -> Any:
    return create_agent(model=MODEL, provider=recorder.provider(), **config)


@pytest.mark.anyio
async def test_a_schema_answer_becomes_result_output() -> None:
    """A JSON Schema mapping: the valid JSON answer is ``result.output`` (plain JSON data), the
    text stays the model's text, and the provider request carries the schema."""
    recorder = Recorder(GOOD)
    result = await agent_with(recorder, output_type=WEATHER_SCHEMA).create_session().run("go")
    assert result.output == {"city": "Paris", "temperature": 21.5}
    assert result.text == GOOD
    assert recorder.requests[0].output == ProviderOutputSpec("output", WEATHER_SCHEMA)


@pytest.mark.anyio
async def test_a_run_without_output_type_has_no_output_and_no_schema() -> None:
    recorder = Recorder(GOOD)
    result = await agent_with(recorder).create_session().run("go")
    assert result.output is None
    assert recorder.requests[0].output is None


@pytest.mark.parametrize("cls", [WeatherDC, WeatherAttrs, WeatherModel], ids=lambda c: c.__name__)
@pytest.mark.anyio
async def test_a_class_output_type_gives_an_instance(cls: type) -> None:
    """Dataclasses, attrs classes and pydantic models build an instance; the schema the
    provider gets is an object schema naming the class and its fields."""
    recorder = Recorder(GOOD)
    result = await agent_with(recorder, output_type=cls).create_session().run("go")
    assert isinstance(result.output, cls)
    assert (result.output.city, result.output.temperature) == ("Paris", 21.5)
    spec = recorder.requests[0].output
    assert spec is not None
    assert spec.name == cls.__name__
    assert spec.schema["type"] == "object"
    assert set(spec.schema["properties"]) == {"city", "temperature"}
    assert sorted(spec.schema["required"]) == ["city", "temperature"]


@pytest.mark.anyio
async def test_a_typeddict_output_type_gives_a_dict() -> None:
    recorder = Recorder(GOOD)
    result = await agent_with(recorder, output_type=WeatherTD).create_session().run("go")
    assert result.output == {"city": "Paris", "temperature": 21.5}
    assert recorder.requests[0].output is not None
    assert recorder.requests[0].output.schema["additionalProperties"] is False


@pytest.mark.anyio
async def test_an_answer_in_a_json_code_fence_is_read() -> None:
    recorder = Recorder(f"```json\n{GOOD}\n```")
    result = await agent_with(recorder, output_type=WeatherDC).create_session().run("go")
    assert result.output == WeatherDC("Paris", 21.5)


@pytest.mark.anyio
async def test_an_invalid_answer_goes_back_with_the_failing_fields() -> None:
    """The retry message names each failing field and carries the schema; the second answer
    validates, so the run succeeds after one retry."""
    recorder = Recorder('{"city": 3}', GOOD)
    result = await agent_with(recorder, output_type=WEATHER_SCHEMA).create_session().run("go")
    assert result.status == "succeeded"
    assert result.output == {"city": "Paris", "temperature": 21.5}
    assert len(recorder.requests) == 2
    retry = recorder.requests[1].messages[-1]
    assert retry.role == "user"
    assert "$.city: expected string (type)" in retry.text
    assert "missing required property 'temperature'" in retry.text
    assert '"temperature":{"type":"number"}' in retry.text


@pytest.mark.anyio
async def test_class_errors_name_the_fields_too() -> None:
    """A pydantic model's own errors name the field that failed."""
    recorder = Recorder('{"city": "Paris", "temperature": "warm"}', GOOD)
    result = await agent_with(recorder, output_type=WeatherModel).create_session().run("go")
    assert result.output == WeatherModel(city="Paris", temperature=21.5)
    assert "$.temperature:" in recorder.requests[1].messages[-1].text


@pytest.mark.anyio
async def test_the_run_fails_after_max_output_retries_by_default_two() -> None:
    """Three answers (the first and two retries), then ``OutputValidationError`` with a failed
    result, the stable code and the problems; no output."""
    recorder = Recorder("not json")
    with pytest.raises(OutputValidationError) as caught:
        await agent_with(recorder, output_type=WEATHER_SCHEMA).create_session().run("go")
    error = caught.value
    assert isinstance(error, AgentRunError)
    assert error.code == "ERR_PRISM_OUTPUT_INVALID"
    assert error.result.status == "failed"
    assert error.result.error is not None
    assert error.result.error.code == "ERR_PRISM_OUTPUT_INVALID"
    assert error.result.output is None
    assert error.problems == ("$: the answer is not JSON (line 1 column 1); answer with JSON only",)
    assert len(recorder.requests) == 3


@pytest.mark.anyio
async def test_max_output_retries_is_a_limit_a_run_may_narrow() -> None:
    """Agent limit 1, run limit 0: one answer only; a run cannot widen it past the agent's."""
    recorder = Recorder("{}")
    agent = agent_with(recorder, output_type=WEATHER_SCHEMA, limits={"max_output_retries": 1})
    with pytest.raises(OutputValidationError):
        await agent.create_session().run("go", limits={"max_output_retries": 0})
    assert len(recorder.requests) == 1
    recorder.requests.clear()
    with pytest.raises(OutputValidationError):
        await agent.create_session().run("go", limits={"max_output_retries": 5})
    assert len(recorder.requests) == 2


@pytest.mark.parametrize("value", [-1, 1.5, True, "2", None])
def test_max_output_retries_must_be_a_non_negative_integer(value: Any) -> None:
    with pytest.raises(AgentConfigError, match="max_output_retries"):
        create_agent(model=MODEL, limits={"max_output_retries": value})


@pytest.mark.anyio
async def test_the_run_output_type_replaces_the_agents() -> None:
    recorder = Recorder(GOOD)
    agent = agent_with(recorder, output_type=WeatherDC)
    result = await agent.create_session().run("go", output_type=WeatherModel)
    assert isinstance(result.output, WeatherModel)


def test_unusable_output_types_are_refused_when_given() -> None:
    """At the agent: a type that is not a schema or a supported class, an invalid schema."""
    with pytest.raises(AgentConfigError, match="output_type must be"):
        create_agent(model=MODEL, output_type=int)
    with pytest.raises(JsonSchemaError):
        create_agent(model=MODEL, output_type={"type": "no-such-type"})


@pytest.mark.anyio
async def test_an_unusable_run_output_type_is_refused_before_the_provider() -> None:
    recorder = Recorder(GOOD)
    session = agent_with(recorder).create_session()
    with pytest.raises(InvalidOptionsError, match="output_type"):
        await session.run("go", output_type=str)
    with pytest.raises(InvalidOptionsError):
        await session.run("go", output_type={"type": 7})
    assert recorder.requests == []


@pytest.mark.anyio
async def test_the_output_rides_the_terminal_checkpoint() -> None:
    """The terminal state holds the schema and the output as JSON; a retry is counted in the
    counters; ``load_agent_run_state`` returns them."""
    world = World()
    agent = world.agent([text_turn("nope"), text_turn(GOOD)], output_type=WeatherDC)
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    assert result.output == WeatherDC("Paris", 21.5)
    status = await load_agent_run_state(world.checkpoints, {"run_id": result.run_id})
    assert status is not None
    assert status.state.status == "succeeded"
    assert status.state.output == {"city": "Paris", "temperature": 21.5}
    assert status.state.output_schema is not None
    assert status.state.output_schema["properties"]["temperature"] == {"type": "number"}
    assert status.state.counters.output_retries == 1


@pytest.mark.anyio
async def test_a_checkpoint_without_output_type_keeps_its_shape() -> None:
    """No output keys, no retry counter and no retry limit in a plain run's checkpoint."""
    world = World()
    agent = world.agent([text_turn("done")])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    record = await world.checkpoints.inner.load("prism.agent-run", result.run_id, ownership=None)
    assert record is not None
    value = record.value
    assert "output" not in value
    assert "output_schema" not in value
    assert "output_retries" not in value["counters"]
    assert "max_output_retries" not in value["limits"]


def approval_tool(log: list[Any]) -> ToolDefinition:
    def lookup(args: dict[str, Any], context: Any) -> Any:
        log.append(args)
        return {"city": args["city"]}

    return ToolDefinition("lookup", lookup)


@pytest.mark.anyio
async def test_a_suspended_run_with_output_type_resumes_to_its_output() -> None:
    """Suspended before a tool; another agent object resumes it and the result carries the
    instance of the agent's type."""
    world, log = World(), []
    turns = [tool_turn(("c1", "lookup", {"city": "Paris"})), text_turn(GOOD)]
    agent = world.agent(turns, tools=[approval_tool(log)], output_type=WeatherAttrs)
    suspended = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    assert suspended.status == "suspended"
    assert suspended.output is None
    other = world.agent(turns, tools=[approval_tool(log)], output_type=WeatherAttrs)
    resumed = await resume_agent_run(
        other,
        {"run_id": suspended.run_id, "session_id": "s1"},
        {"expected_version": suspended.run_state.version, "decision": "approve"},
        **world.resume_options(),
    )
    assert resumed.output == WeatherAttrs("Paris", 21.5)
    assert log == [{"city": "Paris"}]


@pytest.mark.anyio
async def test_a_per_run_output_type_is_checked_after_a_resume_by_its_recorded_schema() -> None:
    """A per-run type the resuming agent does not have: the recorded schema still decides (an
    invalid answer is retried), and the output is its JSON value."""
    world, log = World(), []
    turns = [
        tool_turn(("c1", "lookup", {"city": "Paris"})),
        text_turn('{"city": 1}'),
        text_turn(GOOD),
    ]
    agent = world.agent(turns, tools=[approval_tool(log)])
    suspended = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True), output_type=WeatherDC
    )
    resumed = await resume_agent_run(
        world.agent(turns, tools=[approval_tool(log)]),
        {"run_id": suspended.run_id, "session_id": "s1"},
        {"expected_version": suspended.run_state.version, "decision": "approve"},
        **world.resume_options(),
    )
    assert resumed.output == {"city": "Paris", "temperature": 21.5}
    status = await load_agent_run_state(world.checkpoints, {"run_id": suspended.run_id})
    assert status is not None
    assert status.state.counters.output_retries == 1
