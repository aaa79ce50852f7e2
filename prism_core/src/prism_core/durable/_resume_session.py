"""Resume, step two: the session the resumed run continues, rebuilt from the checkpoint.

Owns reinstating the run's guardrail packs and their state, rebuilding the session at the
checkpoint's leaf (for ``continue``, past the crashed worker's completed tool rounds, refusing
a round that may have started a side effect), the loaded skills, and finding the tool calls
the pending work refers to. It reads the session store; it writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..content import ToolCallContent
from ..errors import AgentRunStateError, GuardrailPackError
from ..guardrails import CompiledGuardrailPacks, compile_guardrail_packs
from ..guardrails._pack_identity import reinstate_refs
from ..skills import Skill, SkillRegistry
from ._decisions import ResumeInput
from ._resume_checks import AMBIGUOUS
from ._resume_ports import ResumableAgent, ResumedSession
from ._state import AgentRunState, PendingCall, arguments_hash

__all__ = ("Rebuilt", "rebuild_session")


@attrs.frozen(kw_only=True)
class Rebuilt:
    """The rebuilt session, the state the resume continues from (for ``continue``, advanced
    past the kept rounds), and the tool calls the pending work refers to."""

    session: ResumedSession
    state: AgentRunState
    calls: dict[str, ToolCallContent]


async def rebuild_session(
    agent: ResumableAgent,
    state: AgentRunState,
    plan: ResumeInput,
    supplied_packs: Sequence[Any] = (),
) -> Rebuilt:
    """The session at the checkpoint's leaf, with its history, packs and skills.

    ``supplied_packs`` are the packs the host supplies again (those recorded by identity)."""
    assert agent.store is not None
    compiled = _compile_packs(agent, state, supplied_packs)
    session = agent.create_session(id=state.session_id, leaf_id=state.leaf_id)
    session.compiled_packs = compiled
    if plan.decision == "continue":
        advance = await _advance_over_finished_work(session, state)
        session.leaf_id, path = advance.leaf, advance.path
        # The crashed worker's kept rounds are charged, and its stored input is not repeated.
        counters = attrs.evolve(
            state.counters,
            turns=state.counters.turns + advance.rounds,
            tool_rounds=state.counters.tool_rounds + advance.rounds,
            tool_calls=state.counters.tool_calls + advance.calls,
        )
        state = attrs.evolve(
            state,
            leaf_id=advance.leaf,
            counters=counters,
            pending_calls=(),
            pending_input=() if advance.input_stored else state.pending_input,
        )
    else:
        path = await session.store.read_branch_path(session.id, session.leaf_id)
    session._load_history(path)
    _restore_skills(agent, session, state)
    calls = _find_calls(path, [c for c in state.pending_calls if c.status != "dispatched"])
    return Rebuilt(session=session, state=state, calls=calls)


def _compile_packs(
    agent: ResumableAgent, state: AgentRunState, supplied: Sequence[Any]
) -> CompiledGuardrailPacks | None:
    block = state.session_state.guardrail_packs if state.session_state is not None else None
    if block is None:
        if supplied:
            raise AgentRunStateError(
                "guardrail packs were supplied but the checkpoint records none"
            )
        return None

    def compile_one(ref: Any) -> Mapping[str, Any]:
        one = compile_guardrail_packs(
            [ref], catalogue=agent.pack_catalogue, can_suspend=True, redactor=agent.redactor
        )
        return one.refs[0]

    try:
        if not isinstance(block, Mapping) or set(block) - {"packs", "state"}:
            raise GuardrailPackError("malformed guardrail pack block")
        rows = block.get("packs") or []
        if not isinstance(rows, Sequence):
            raise GuardrailPackError("malformed guardrail pack rows")
        compiled = compile_guardrail_packs(
            reinstate_refs(rows, supplied, compile_one),
            catalogue=agent.pack_catalogue,
            can_suspend=True,
            redactor=agent.redactor,
        )
        saved = block.get("state") or {}
        if not isinstance(saved, Mapping):
            raise GuardrailPackError("malformed guardrail pack state")
        compiled.restore_state(saved)
    except GuardrailPackError as exc:
        raise AgentRunStateError(f"guardrail packs cannot be reinstated: {exc}") from exc
    return compiled


def _restore_skills(agent: ResumableAgent, session: ResumedSession, state: AgentRunState) -> None:
    record = state.session_state
    if record is None:
        return
    if record.loaded_skill_bodies is not None:
        for body in record.loaded_skill_bodies:
            session.loaded_skills.add(Skill(body.name, body.instructions))
        return
    source = agent.skills
    available: Sequence[Skill] = (
        source.all() if isinstance(source, SkillRegistry) else tuple(source or ())
    )
    by_name = {skill.name: skill for skill in available}
    for name in record.loaded_skill_names:
        # A skill the registry no longer serves is re-resolved by load_skill when needed.
        if name in by_name:
            session.loaded_skills.add(by_name[name])


@attrs.frozen(kw_only=True)
class _Advance:
    leaf: str | None
    path: list[Any]
    rounds: int
    calls: int
    input_stored: bool


async def _advance_over_finished_work(session: ResumedSession, state: AgentRunState) -> _Advance:
    """The leaf after the crashed worker's completed tool rounds (``continue`` only).

    Entries the crashed worker appended after the checkpoint's leaf are kept when they form
    complete rounds (an assistant tool call with every result); a final answer it never
    checkpointed is dropped so the turn is asked again. A round with a missing result may have
    started a side effect, so it is refused as ambiguous; so is a call marked ``dispatched`` in
    the checkpoint whose result was never stored. Returns the leaf, its branch (both from one
    read of the session), the kept rounds and calls, and whether held input was stored.
    """
    entries = await session.store.list(state.session_id)
    by_id = {entry.id: entry for entry in entries}
    children: dict[str | None, list[Any]] = {}
    for entry in entries:
        if entry.run_id == state.run_id:
            children.setdefault(entry.parent_id, []).append(entry)
    safe = current = state.leaf_id
    outstanding = {c.tool_call_id for c in state.pending_calls if c.status == "dispatched"}
    rounds = calls = 0
    input_stored = False
    held = list(state.pending_input)
    while children.get(current):
        entry = children[current][-1]
        message = entry.message
        if message is not None and message.role == "assistant":
            if not message.tool_calls or outstanding:
                break
            outstanding = {call.id for call in message.tool_calls}
            rounds += 1
            calls += len(outstanding)
        elif message is not None and message.role == "user" and held and message == held[0]:
            held.pop(0)
            input_stored = not held
            if not outstanding:
                safe = entry.id
        elif message is not None and message.role == "tool":
            for block in message.content:
                outstanding.discard(getattr(block, "tool_call_id", ""))
            if not outstanding:
                safe = entry.id
        elif not outstanding:
            safe = entry.id
        current = entry.id
    if outstanding:
        raise AgentRunStateError(AMBIGUOUS)
    path: list[Any] = []
    cursor = safe
    while cursor is not None:
        node = by_id.get(cursor)
        if node is None:
            raise AgentRunStateError("the checkpoint's session leaf is missing from the session")
        path.append(node)
        cursor = node.parent_id
    path.reverse()
    return _Advance(leaf=safe, path=path, rounds=rounds, calls=calls, input_stored=input_stored)


def _find_calls(path: Sequence[Any], pending: Sequence[PendingCall]) -> dict[str, ToolCallContent]:
    wanted = {call.tool_call_id: call for call in pending}
    found: dict[str, ToolCallContent] = {}
    for entry in reversed(path):
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for call in message.tool_calls:
            if call.id in wanted and call.id not in found:
                if arguments_hash(call.arguments) != wanted[call.id].arguments_hash:
                    raise AgentRunStateError(
                        "a pending tool call no longer matches its recorded arguments hash"
                    )
                found[call.id] = call
        if len(found) == len(wanted):
            break
    if len(found) != len(wanted):
        raise AgentRunStateError("a pending tool call is missing from the session branch")
    return found
