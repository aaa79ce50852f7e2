"""A durable every-turn run that records how many commits each of its turns cost.

The run has four turns: the model calls a read-only tool, then an idempotent one, then a
side-effecting one, then answers. A turn's commits are the store commits between the model
call that starts it and the one that starts the next turn (or the end of the run): its
assistant message, dispatched marks and tool results, and the turn checkpoint after it.
Each backend's test counts commits its own way (a wrapped store, a trace callback, an
engine event, a wrapped client) and hands :func:`commits_per_turn` a reader of that count.
When the checkpoint store keeps an effect ledger, the run's effect records must be there
after it (written in those same commits): the idempotent and the side-effecting call,
completed, and no record of the read-only one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from prism_core import RunStateOptions, create_agent, create_mock_provider, list_effects
from prism_core.durable._outbox import OUTBOX_NAMESPACE
from prism_core.stores import EffectLedger, capability
from tests.core.helpers import echo_tool, text_turn, tool_turn

__all__ = ("TURNS", "commits_per_turn")

#: The turns, in order, as :func:`commits_per_turn` reports them.
TURNS = ("read-only", "idempotent", "side-effecting", "answer")


async def commits_per_turn(
    checkpoints: Any, sessions: Any, commits: Callable[[], int], *, notify: bool = False
) -> dict[str, int]:
    """Run the four-turn workload on the two stores; the commits of each turn, by name.
    ``notify``: the run writes its notifications to the outbox (its end: ``finished``)."""
    marks: list[int] = []
    log: list[Any] = []
    provider = create_mock_provider(
        on_request=lambda request: marks.append(commits()),
        turns=[
            tool_turn(("c1", "lookup", {"q": "a"})),
            tool_turn(("c2", "ensure", {"q": "b"})),
            tool_turn(("c3", "charge", {"q": "c"})),
            text_turn("done"),
        ],
    )
    agent = create_agent(
        id="counter",
        model={"provider": "mock", "model": "m"},
        provider=provider,
        store=sessions,
        tools=[
            echo_tool("lookup", log, effect="read"),
            echo_tool("ensure", log, idempotent=True),
            echo_tool("charge", log),
        ],
    )
    session = agent.create_session(id=f"s-{uuid.uuid4().hex[:12]}")
    result = await session.run(
        "go",
        run_state=RunStateOptions(
            checkpoints, "rev-1", checkpoint_policy="every-turn", notify=notify
        ),
    )
    assert result.status == "succeeded"
    assert len(log) == 3
    ends = [*marks[1:], commits()]
    per_turn = {name: end - start for name, start, end in zip(TURNS, marks, ends, strict=True)}
    # The outbox holds the run's end when it notifies, else nothing at all.
    page = await checkpoints.list(OUTBOX_NAMESPACE)
    mine = [r.value for r in page.records if r.value["notification"]["run_id"] == result.run_id]
    assert [v["notification"]["event"] for v in mine] == (["finished"] if notify else [])
    if capability(checkpoints, EffectLedger) is not None:
        effects = await list_effects(checkpoints, run_id=result.run_id)
        assert [(e.tool_name, e.status) for e in effects.effects] == [
            ("ensure", "completed"),
            ("charge", "completed"),
        ]
    return per_turn
