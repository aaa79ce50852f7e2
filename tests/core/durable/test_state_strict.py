"""Run state schema v1 is parsed strictly: nothing is coerced, every bound is checked."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import AgentRunStateError, create_memory_checkpoint_store, load_agent_run_state
from prism_core.durable import HARD_MAX_AGENT_RUN_STATE_BYTES
from prism_core.durable._state_parse import parse_state

from ..records_support import REF, good_state, seed

HARD = HARD_MAX_AGENT_RUN_STATE_BYTES


async def _parse(**changes: Any) -> Any:
    """Store a state with ``changes`` and load it through the public API."""
    store = create_memory_checkpoint_store()
    await seed(store, value=good_state(**changes))
    found = await load_agent_run_state(store, REF)
    assert found is not None
    return found.state


def _session(**changes: Any) -> dict[str, Any]:
    return {"loaded_skill_names": [], "loaded_skill_bodies": None, **changes}


@pytest.mark.anyio
async def test_a_good_state_parses() -> None:
    """The reference state parses, with its skill catalogue and limits."""
    state = await _parse(
        session_state=_session(loaded_skill_names=["brief"]),
        limits={"max_turns": 3, "max_cost": 1.5, "cost_currency": "EUR"},
        wall_deadline=1700000000,
    )
    assert state.session_state is not None
    assert state.session_state.loaded_skill_names == ("brief",)
    assert state.wall_deadline == 1700000000.0


BAD_STATES: list[tuple[str, dict[str, Any]]] = [
    ("65 skill names", {"session_state": _session(loaded_skill_names=["s"] * 65)}),
    ("257-character name", {"session_state": _session(loaded_skill_names=["n" * 257])}),
    ("empty skill name", {"session_state": _session(loaded_skill_names=[""])}),
    ("names as a string", {"session_state": _session(loaded_skill_names="brief")}),
    ("name as a number", {"session_state": _session(loaded_skill_names=[5])}),
    (
        "65 skill bodies",
        {
            "session_state": _session(
                loaded_skill_bodies=[{"name": f"s{i}", "instructions": "x"} for i in range(65)]
            )
        },
    ),
    ("negative turns", {"counters": {"turns": -1}}),
    ("float turns", {"counters": {"turns": 1.5}}),
    ("whole float turns", {"counters": {"turns": 2.0}}),
    ("bool turns", {"counters": {"turns": True}}),
    ("string turns", {"counters": {"turns": "3"}}),
    ("negative usage", {"counters": {"usage": {"input_tokens": -5}}}),
    ("limits as a string", {"limits": "garbage"}),
    ("unknown limit", {"limits": {"max_bananas": 3}}),
    ("limit as a string", {"limits": {"max_turns": "3"}}),
    ("negative limit", {"limits": {"max_turns": -1}}),
    ("float count limit", {"limits": {"max_turns": 1.5}}),
    ("bool limit", {"limits": {"max_cost": True}}),
    ("null byte limit", {"limits": {"max_request_bytes": None}}),
    ("huge byte limit", {"limits": {"max_request_bytes": 2**40}}),
    ("currency as a number", {"limits": {"cost_currency": 5}}),
    ("run id as a number", {"run_id": 7}),
    ("empty agent id", {"agent_id": ""}),
    ("leaf id as a list", {"leaf_id": ["a"]}),
    ("flag as an int", {"interrupt_before_tool": 1}),
    ("state bytes as a string", {"max_state_bytes": "100"}),
    ("state bytes zero", {"max_state_bytes": 0}),
    ("state bytes over the cap", {"max_state_bytes": HARD + 1}),
    ("deadline as a string", {"wall_deadline": "soon"}),
    ("tool names as a string", {"tool_names": "probe"}),
    ("policy not known", {"checkpoint_policy": "sometimes"}),
    ("schema version as a bool", {"schema_version": True}),
    ("schema version as a float", {"schema_version": 1.0}),
    ("status not known", {"status": "paused"}),
    ("counters as a list", {"counters": [1, 2]}),
    (
        "129 pending decisions",
        {
            "interruption": {
                "kind": "tool_approval",
                "pending_decisions": [
                    {"approval_id": f"a{i}", "kind": "tool_approval"} for i in range(129)
                ],
            }
        },
    ),
]


@pytest.mark.parametrize(("case", "changes"), BAD_STATES, ids=[c for c, _ in BAD_STATES])
@pytest.mark.anyio
async def test_malformed_fields_are_refused(case: str, changes: dict[str, Any]) -> None:
    """Each malformed field is an AgentRunStateError with a short message, never a coercion."""
    with pytest.raises(AgentRunStateError) as info:
        await _parse(**changes)
    assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert len(info.value.message) < 1000


@pytest.mark.anyio
async def test_the_message_names_the_field() -> None:
    """The refusal says which field is wrong, in the spec's words."""
    with pytest.raises(AgentRunStateError, match=r"Malformed agent run state: .*turns"):
        await _parse(counters={"turns": 1.5})
    with pytest.raises(AgentRunStateError, match="loaded_skill_names"):
        await _parse(session_state=_session(loaded_skill_names="brief"))


def test_the_run_is_named_when_known() -> None:
    """With ``run_id`` the message names the run whose state is malformed."""
    with pytest.raises(AgentRunStateError, match="run-42"):
        parse_state(good_state(counters={"turns": -1}), max_bytes=HARD, run_id="run-42")


@pytest.mark.anyio
async def test_a_string_where_a_list_belongs_is_refused_by_shape() -> None:
    """A 1 MB string for a list of messages is refused by its JSON type at once, not after
    structuring (and failing) a message per character."""
    with pytest.raises(AgentRunStateError, match=r"pending_input must be a list, got str"):
        await _parse(pending_input="x" * 1_000_000)
    with pytest.raises(AgentRunStateError, match=r"content must be a list, got str"):
        await _parse(pending_input=[{"role": "user", "content": "x" * 1_000_000}])
