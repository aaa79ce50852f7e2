"""Hostile and huge run-state options, lone surrogates and bounded messages."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunStateError,
    CanonicalJsonError,
    InvalidCheckpointError,
    PrismError,
    RunStateOptions,
    create_memory_checkpoint_store,
)
from prism_core._echo import echo
from prism_core.codec import dumps

from ..durable_support import REVISION, CountingStore, World
from ..helpers import text_turn
from ..hostile_values import Hostile, HostileMapping, nested


def test_echo_is_bounded_and_never_raises() -> None:
    """A 5 MB string, a deep value and a hostile repr all echo within the limit."""
    assert len(echo("x" * 5_000_000)) == 80
    assert echo("x" * 5_000_000).endswith("…")
    assert len(echo(nested(100_000))) <= 80
    assert "Hostile" in echo(Hostile())
    assert echo("short") == "'short'"
    assert echo(list(range(10_000)), 30) == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9…"


def test_lone_surrogate_in_canonical_json_is_typed() -> None:
    """codec.dumps refuses a lone surrogate with a typed error (also a ValueError)."""
    with pytest.raises(CanonicalJsonError) as info:
        dumps({"k": "\ud800"})
    assert info.value.code == "ERR_PRISM_JSON_INVALID"
    assert isinstance(info.value, ValueError)
    with pytest.raises(CanonicalJsonError):
        dumps(nested(100_000))


BAD_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("huge policy", {"checkpoint_policy": "x" * 5_000_000}),
    ("deep policy", {"checkpoint_policy": nested(100_000)}),
    ("hostile policy", {"checkpoint_policy": Hostile()}),
    ("huge state bytes", {"max_state_bytes": "9" * 5_000_000}),
    ("deep state bytes", {"max_state_bytes": nested(100_000)}),
    ("hostile fencing token", {"fencing_token": Hostile()}),
    ("deep fencing token", {"fencing_token": nested(100_000)}),
    ("hostile ownership", {"ownership": HostileMapping()}),
    ("surrogate ownership", {"ownership": {"tenant": "\ud800"}}),
    ("hostile ownership value", {"ownership": {"tenant": Hostile()}}),
    ("deep ownership", {"ownership": {"tenant": nested(100_000)}}),
    ("hostile metadata", {"checkpoint_metadata": HostileMapping()}),
    ("surrogate metadata value", {"checkpoint_metadata": {"git": "\ud800"}}),
    ("surrogate metadata key", {"checkpoint_metadata": {"\udfff": "abc"}}),
    ("deep metadata", {"checkpoint_metadata": {"git": nested(100_000)}}),
    ("surrogate revision", {"definition_revision": "rev-\ud800"}),
    ("hostile revision", {"definition_revision": Hostile()}),
    ("hostile flag", {"interrupt_before_tool": Hostile()}),
    ("hostile store", {"checkpoints": Hostile()}),
]


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["mapping", "attrs"])
@pytest.mark.parametrize(("case", "options"), BAD_OPTIONS, ids=[c for c, _ in BAD_OPTIONS])
async def test_hostile_options_are_refused_before_any_write(
    case: str, options: dict[str, Any], form: str
) -> None:
    """Each hostile option is an AgentRunStateError with a short message and zero writes."""
    world = World()
    agent = world.agent([text_turn("done")])
    fields = {"checkpoints": world.checkpoints, "definition_revision": REVISION, **options}
    run_state: Any = fields
    if form == "attrs":
        checkpoints = fields.pop("checkpoints")
        revision = fields.pop("definition_revision")
        run_state = RunStateOptions(checkpoints, revision, **fields)
    with pytest.raises(AgentRunStateError) as info:
        await agent.create_session(id="s1").run("go", run_state=run_state)
    assert len(info.value.message) < 1000
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_hostile_mapping_form_keys() -> None:
    """Non-string and huge unknown keys of the mapping form are refused with a short message."""
    world = World()
    agent = world.agent([text_turn("done")])
    base = {"checkpoints": world.checkpoints, "definition_revision": REVISION}
    for extra in ({1: 2}, {Hostile(): 1}, {"k" * 5_000_000: 1}):
        with pytest.raises(AgentRunStateError) as info:
            await agent.create_session(id="s1").run("go", run_state={**base, **extra})
        assert len(info.value.message) < 1000
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_surrogates_from_a_metadata_callable_fail_the_write_typed() -> None:
    """A callable that returns a lone surrogate, or raises, fails typed with nothing saved."""
    from prism_core import AgentRunError

    for source in (lambda: {"git": "\ud800"}, lambda: 1 / 0):
        world = World()
        agent = world.agent([text_turn("done")])
        with pytest.raises((AgentRunError, AgentRunStateError)) as info:
            await agent.create_session(id="s1").run(
                "go",
                run_state=world.run_state(
                    checkpoint_policy="every-turn", checkpoint_metadata=source
                ),
            )
        assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
        assert world.checkpoints.saves == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [
        {"metadata": {"k": "\ud800"}},
        {"ownership": {"k": "\ud800"}},
        {"category": "\ud800"},
        {"value": {"k": "\ud800"}},
    ],
)
async def test_store_refuses_lone_surrogates(arguments: dict[str, Any]) -> None:
    """Every store argument holding a lone surrogate is an InvalidCheckpointError."""
    store = CountingStore(create_memory_checkpoint_store())
    arguments = dict(arguments)
    value = arguments.pop("value", {"ok": True})
    with pytest.raises(InvalidCheckpointError):
        await store.save("ns", "key", value, version=1, **arguments)
    with pytest.raises(InvalidCheckpointError):
        await store.load("ns", "\ud800")
    assert await store.inner.list() is not None
    assert not (await store.inner.list()).records


def test_messages_from_the_store_are_bounded() -> None:
    """A huge version is echoed in a bounded message."""
    import anyio

    store = create_memory_checkpoint_store()

    async def main() -> None:
        with pytest.raises(PrismError) as info:
            await store.save("ns", "k", {}, version="9" * 5_000_000)  # type: ignore[arg-type]
        assert len(info.value.message) < 1000

    anyio.run(main)


def test_memory_store_limits_are_typed_and_bounded() -> None:
    """A malformed store limit is an InvalidCheckpointError with a bounded message."""
    for bad in ("9" * 5_000_000, 0, True, nested(100_000)):
        with pytest.raises(InvalidCheckpointError) as info:
            create_memory_checkpoint_store(max_records=bad)
        assert len(info.value.message) < 1000


@pytest.mark.anyio
async def test_lifecycle_status_refuses_an_agent_id_that_is_not_a_string() -> None:
    """A hostile agent_id is refused typed instead of being compared."""
    from prism_core import create_agent_run_lifecycle

    from ..records_support import REF, seed

    store = create_memory_checkpoint_store()
    await seed(store)
    lifecycle = create_agent_run_lifecycle(checkpoints=store, resolve_agent=lambda a: None)
    with pytest.raises(AgentRunStateError, match="agent_id must be a string"):
        await lifecycle.status(REF, agent_id=Hostile())  # type: ignore[arg-type]
