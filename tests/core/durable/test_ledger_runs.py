"""The effect ledger of durable runs on the memory stores (the scenarios every backend runs)."""

from __future__ import annotations

import pytest

from prism_core import create_memory_checkpoint_store, create_memory_session_store
from tests import ledger_scenarios

SCENARIOS = [
    ledger_scenarios.a_runs_effects_and_every_filter,
    ledger_scenarios.a_crash_inside_a_tool_is_in_doubt_then_resolved,
    ledger_scenarios.reconcile_settles_as_the_kernel,
    ledger_scenarios.sub_agent_effects_name_their_parent,
]


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_scenario_on_memory_stores(scenario: object) -> None:
    """Each ledger scenario holds on the memory stores."""
    await scenario(create_memory_checkpoint_store(), create_memory_session_store())  # type: ignore[operator]
