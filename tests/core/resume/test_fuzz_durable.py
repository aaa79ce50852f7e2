"""Fuzzing the durable entry points: every refusal is a PrismError, bounded, with no write.

Drives run-state options (both forms) through ``session.run``, stored records with malformed
values through ``load_agent_run_state`` and ``lifecycle.status``, and malformed ``ref``,
``resume`` and options through ``resume_agent_run``, ``resume_agent_run_stream`` and the
lifecycle's ``resume`` and ``resume_stream``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism_core import (
    AgentRunError,
    PrismError,
    RunStateOptions,
    create_agent_run_lifecycle,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)
from prism_core.durable import agent_fingerprint

from ..durable_support import REVISION, CountingStore, World
from ..helpers import text_turn
from ..hostile_values import Hostile, HostileMapping, nested
from ..records_support import REF, good_state, seed

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_MESSAGE = 1000


DEEP = nested(50_000)
HUGE = "x" * 1_000_000

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["\ud800", "a\udfffb", "", " ", "every-turn", "decision", HUGE])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
hostile = st.sampled_from(
    [Hostile(), HostileMapping(), DEEP, object(), b"bytes", float("nan"), 10**400, (1, 2), {1, 2}]
)
values = (
    json_values
    | hostile
    | st.lists(hostile, max_size=3)
    | st.dictionaries(st.text(max_size=4), hostile, max_size=3)
)

OPTION_FIELDS = (
    "definition_revision",
    "interrupt_before_tool",
    "checkpoint_policy",
    "persist_session_state",
    "include_skill_bodies",
    "max_state_bytes",
    "checkpoint_metadata",
    "ownership",
    "fencing_token",
)


def _check_refusal(exc: BaseException) -> None:
    assert isinstance(exc, PrismError), f"{type(exc).__name__}: {exc!s:.300}"
    assert len(exc.message) < MAX_MESSAGE, f"message of {len(exc.message)} characters"


def _run(main: Callable[[], Any]) -> None:
    anyio.run(main)


@FUZZ
@given(
    changes=st.dictionaries(st.sampled_from(OPTION_FIELDS), values, min_size=1, max_size=3),
    form=st.sampled_from(["mapping", "attrs"]),
    extra=st.none()
    | st.dictionaries(json_scalars.filter(lambda k: k is not None), values, max_size=2),
)
def test_fuzz_run_state_options(changes: dict[str, Any], form: str, extra: Any) -> None:
    """Malformed run_state options: a bounded PrismError and no checkpoint write."""
    world = World()
    agent = world.agent([text_turn("done")])
    fields: dict[str, Any] = {"checkpoints": world.checkpoints, "definition_revision": REVISION}
    fields.update(changes)
    run_state: Any
    if form == "attrs":
        rest = {k: v for k, v in fields.items() if k not in ("checkpoints", "definition_revision")}
        run_state = RunStateOptions(fields["checkpoints"], fields["definition_revision"], **rest)
    else:
        run_state = {**fields, **(extra or {})} if extra else fields

    async def main() -> None:
        try:
            await agent.create_session(id="s1").run("go", run_state=run_state)
        except Exception as exc:
            _check_refusal(exc)
            assert world.checkpoints.saves == 0

    _run(main)


STATE_FIELDS = tuple(good_state())


@FUZZ
@given(
    replaced=st.dictionaries(st.sampled_from(STATE_FIELDS), json_values, max_size=3),
    dropped=st.sets(st.sampled_from(STATE_FIELDS), max_size=2),
    whole=st.none() | json_values,
    metadata=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
)
def test_fuzz_stored_records(
    replaced: dict[str, Any], dropped: set[str], whole: Any, metadata: Any
) -> None:
    """Malformed stored states: status and load return or refuse with a bounded PrismError,
    and nothing is written."""
    value = good_state(**replaced)
    for name in dropped:
        value.pop(name, None)
    if whole is not None:
        value = whole
    store = CountingStore()
    lifecycle = create_agent_run_lifecycle(
        checkpoints=store, resolve_agent=lambda agent_id: (None, REVISION)
    )

    async def main() -> None:
        try:
            await seed(store.inner, value=value, metadata=metadata or {})
        except PrismError:
            return  # a value the store itself refuses to hold
        for call in (
            lambda: load_agent_run_state(store, REF),
            lambda: lifecycle.status(REF),
        ):
            try:
                await call()
            except Exception as exc:
                _check_refusal(exc)
        assert store.saves == 0

    _run(main)


RESUME_OPTIONS = (
    "restore_hooks",
    "restore_hook_timeout_ms",
    "checkpoint_metadata",
    "persist_session_state",
    "include_skill_bodies",
    "ownership",
    "on_session",
    "definition_revision",
)

# Half of the references and resume inputs are well formed, so the options and the stored
# record are reached as often as the shape checks in front of them.
good_ref = st.just(REF)
refs = st.one_of(
    good_ref, good_ref, values, st.fixed_dictionaries({"run_id": values, "session_id": values})
)
good_resume = st.sampled_from(
    [{"decision": d, "expected_version": 1} for d in ("approve", "deny", "continue")]
)
resumes = st.one_of(
    good_resume,
    good_resume,
    values,
    st.fixed_dictionaries(
        {
            "decision": values | st.sampled_from(["approve", "deny", "continue"]),
            "expected_version": values,
        }
    ),
)


ENTRY_POINTS = ("resume", "resume_stream", "lifecycle_resume", "lifecycle_resume_stream")


async def _drive(entry: str, agent: Any, world: World, ref: Any, resume: Any, options: Any) -> None:
    """Resume through ``entry`` and consume it to the end."""
    if entry.startswith("lifecycle"):
        lifecycle = create_agent_run_lifecycle(
            checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
        )
        request = {k: v for k, v in options.items() if k != "definition_revision"}
        if entry == "lifecycle_resume":
            await lifecycle.resume(ref, resume, **request)
            return
        async for _ in lifecycle.resume_stream(ref, resume, **request):
            pass
        return
    kwargs = {"checkpoints": world.checkpoints, "definition_revision": REVISION, **options}
    if entry == "resume":
        await resume_agent_run(agent, ref, resume, **kwargs)
        return
    async for _ in resume_agent_run_stream(agent, ref, resume, **kwargs):
        pass


@FUZZ
@given(
    entry=st.sampled_from(ENTRY_POINTS),
    ref=refs,
    resume=resumes,
    options=st.dictionaries(st.sampled_from(RESUME_OPTIONS), values, max_size=3),
    status=st.sampled_from(["running", "suspended", "succeeded"]),
)
def test_fuzz_resume_input(
    entry: str, ref: Any, resume: Any, options: dict[str, Any], status: str
) -> None:
    """Malformed ref, resume and options through every resume entry point (``resume_agent_run``,
    its stream, the lifecycle's ``resume`` and ``resume_stream``): a bounded PrismError, and no
    checkpoint write unless the run was claimed (a claimed run may fail later as an
    AgentRunError)."""
    world = World()
    agent = world.agent([text_turn("done")])
    state = good_state(
        status=status,
        agent_id=agent.id,
        session_id=REF["session_id"],
        fingerprint=agent_fingerprint(agent, REVISION),
    )

    async def main() -> None:
        await seed(world.checkpoints.inner, value=state)
        try:
            await _drive(entry, agent, world, ref, resume, options)
        except Exception as exc:
            _check_refusal(exc)
            if not isinstance(exc, AgentRunError):
                assert world.checkpoints.saves == 0

    _run(main)
