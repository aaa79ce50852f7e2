"""Resume, step two: the session the resumed run continues, rebuilt from the checkpoint.

Owns reinstating the run's guardrail packs and their state, rebuilding the session at the
checkpoint's leaf (for ``continue``, past the crashed worker's completed tool rounds, up to the
last result of a round the crash cut short), the loaded skills, and finding the tool calls
the pending work refers to. It reads the session store; it must not write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..content import ToolCallContent
from ..durable._state import AgentRunState, PendingCall, RunCountersState, arguments_hash
from ..errors import AgentRunStateError, GuardrailPackError
from ..guardrails import CompiledGuardrailPacks, compile_guardrail_packs
from ..guardrails._pack_identity import reinstate_refs
from ..records._run_tail import read_branch_and_run_tail
from ..records._store import SessionEntryNotFoundError
from ..skills import Skill, SkillRegistry
from ._input import ResumeInput
from ._ports import ResumableAgent, ResumedSession

__all__ = ("Rebuilt", "new_session", "rebuild_session")


@attrs.frozen(kw_only=True)
class Rebuilt:
    """The rebuilt session, the state the resume continues from (for ``continue``, advanced
    past the kept rounds), and the tool calls the pending work refers to.

    For ``continue`` after a crash inside a tool round, ``state`` is anchored where that round
    starts (its leaf and counters, the calls still owed a result in ``pending_calls``) while
    the session stands at the round's last stored entry; ``counters`` include the round;
    ``fresh`` are the round's calls that were never marked ``dispatched`` (never started, or
    read-only or idempotent) and have no result.
    """

    session: ResumedSession
    state: AgentRunState
    calls: dict[str, ToolCallContent]
    counters: RunCountersState
    fresh: tuple[ToolCallContent, ...] = ()
    #: For ``continue``: the checkpoint's owed calls whose results the stopped process had
    #: stored, each with whether its result is an error (their receipts may be missing).
    finished: Mapping[str, bool] = attrs.field(factory=dict)


def new_session(agent: ResumableAgent, state: AgentRunState) -> ResumedSession:
    """The session a resume rebuilds, at the checkpoint's session and leaf, before anything is
    reinstated into it (the resume's ``on_session`` observer sees it first)."""
    return agent.create_session(id=state.session_id, leaf_id=state.leaf_id)


async def rebuild_session(
    agent: ResumableAgent,
    session: ResumedSession,
    state: AgentRunState,
    plan: ResumeInput,
    supplied_packs: Sequence[Any] = (),
    *,
    prefetched: Any = None,
) -> Rebuilt:
    """``session`` (see :func:`new_session`) with the checkpoint's packs, history and skills.

    ``supplied_packs`` are the packs the host supplies again (those recorded by identity);
    ``prefetched`` is the session read a ``continue`` made with its checkpoint load, if any
    (:class:`~prism_core.records._run_tail.PrefetchedBranchAndRunTail`)."""
    assert agent.store is not None
    session.compiled_packs = _compile_packs(agent, state, supplied_packs)
    fresh: tuple[ToolCallContent, ...] = ()
    finished: Mapping[str, bool] = {}
    counters = state.counters
    if plan.decision == "continue":
        advance = await _advance_over_finished_work(session, state, prefetched)
        leaf, path = advance.leaf, advance.path

        def charged(rounds: int, calls: int) -> RunCountersState:
            # The crashed worker's kept rounds are charged, and its stored input is not
            # repeated.
            if not (rounds or calls):
                return state.counters
            return attrs.evolve(
                state.counters,
                turns=state.counters.turns + rounds,
                tool_rounds=state.counters.tool_rounds + rounds,
                tool_calls=state.counters.tool_calls + calls,
            )

        counters = charged(advance.rounds, advance.calls)
        anchored = (
            advance.anchor,
            charged(advance.anchor_rounds, advance.anchor_calls),
            advance.owed,
            () if advance.input_stored else state.pending_input,
        )
        # A crash at a turn boundary (the common case) left nothing after the checkpoint.
        if anchored != (state.leaf_id, state.counters, state.pending_calls, state.pending_input):
            leaf_id, anchor_counters, owed, pending_input = anchored
            state = attrs.evolve(
                state,
                leaf_id=leaf_id,
                counters=anchor_counters,
                pending_calls=owed,
                pending_input=pending_input,
            )
        fresh, finished = advance.fresh, advance.finished
    else:
        leaf = session.leaf_id
        path = await session.store.read_branch_path(session.id, leaf)
    session.transcript.move_to(leaf, path)
    _restore_skills(agent, session, state)
    # ``deny`` runs nothing and reads no call, so a run is always decidable by a deny, even
    # when its pending calls no longer match the session.
    calls: dict[str, ToolCallContent] = {}
    if plan.decision != "deny":
        calls = _find_calls(path, list(state.pending_calls))
        calls.update({call.id: call for call in fresh})
    return Rebuilt(
        session=session,
        state=state,
        calls=calls,
        counters=counters,
        fresh=fresh,
        finished=finished,
    )


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
            [ref],
            catalogue=agent.config.pack_catalogue,
            can_suspend=True,
            redactor=agent.config.redactor,
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
            catalogue=agent.config.pack_catalogue,
            can_suspend=True,
            redactor=agent.config.redactor,
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
    if record.attention_sticky is not None:
        # The run that wrote it opted in (persist_session_state): its stubs stay applied.
        session.attention_frontier.restore(record.attention_sticky)
    if record.loaded_skill_bodies is not None:
        for body in record.loaded_skill_bodies:
            session.loaded_skills.add(Skill(body.name, body.instructions))
        return
    source = agent.config.skills
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
    anchor: str | None
    anchor_rounds: int
    anchor_calls: int
    owed: tuple[PendingCall, ...]
    fresh: tuple[ToolCallContent, ...]
    finished: dict[str, bool]


async def _advance_over_finished_work(
    session: ResumedSession, state: AgentRunState, prefetched: Any = None
) -> _Advance:
    """The leaf after the crashed worker's completed tool rounds (``continue`` only).

    Entries the crashed worker appended after the checkpoint's leaf are kept when they form
    complete rounds (an assistant tool call with every result); a final answer it never
    checkpointed is dropped so the turn is asked again. A round cut short by the crash is kept
    with the results it stored: its calls recorded in the checkpoint's pending calls stay
    owed (``dispatched`` ones are in doubt), and its other calls never started a side effect
    (they were never marked) and are run again. Returns the leaf, its branch, the kept rounds
    and calls, whether held input was stored, and the unfinished round's anchor, owed and
    fresh calls, all from one store call that reads only the checkpoint's branch and the
    run's entries after its leaf (:func:`~prism_core.records.read_branch_and_run_tail`).
    """
    try:
        read = await read_branch_and_run_tail(
            session.store, state.session_id, state.leaf_id, state.run_id, prefetched
        )
    except SessionEntryNotFoundError as exc:
        raise AgentRunStateError(
            "the checkpoint's session leaf is missing from the session"
        ) from exc
    children: dict[str | None, list[Any]] = {}
    for entry in read.tail:
        children.setdefault(entry.parent_id, []).append(entry)
    safe = current = state.leaf_id
    owed = {c.tool_call_id: c for c in state.pending_calls if c.status != "pending"}
    outstanding = set(owed)
    round_calls: list[ToolCallContent] = []
    anchor, anchor_rounds, anchor_calls = safe, 0, 0
    tail = safe
    rounds = calls = 0
    input_stored = False
    finished: dict[str, bool] = {}
    held = list(state.pending_input)
    while children.get(current):
        entry = children[current][-1]
        message = entry.message
        if message is not None and message.role == "assistant":
            ids = {call.id for call in message.tool_calls}
            # The owed calls of the checkpoint belong to the first round after its anchor.
            if not message.tool_calls or not outstanding <= ids:
                break
            anchor, anchor_rounds, anchor_calls = safe, rounds, calls
            round_calls = list(message.tool_calls)
            outstanding = ids
            rounds += 1
            calls += len(outstanding)
            tail = entry.id
        elif message is not None and message.role == "user" and held and message == held[0]:
            held.pop(0)
            input_stored = not held
            if not outstanding:
                safe = entry.id
        elif message is not None and message.role == "tool":
            for block in message.content:
                call_id = getattr(block, "tool_call_id", "")
                outstanding.discard(call_id)
                if call_id in owed:
                    finished[call_id] = getattr(block, "error", None) is not None
            tail = entry.id
            if not outstanding:
                safe = entry.id
        elif not outstanding:
            safe = entry.id
        current = entry.id
    leaf = safe
    unsettled: tuple[PendingCall, ...] = ()
    fresh: tuple[ToolCallContent, ...] = ()
    if outstanding:
        leaf = tail
        unsettled = tuple(c for c in state.pending_calls if c.tool_call_id in outstanding)
        fresh = tuple(c for c in round_calls if c.id in outstanding and c.id not in owed)
    else:
        anchor, anchor_rounds, anchor_calls = safe, rounds, calls
    return _Advance(
        leaf=leaf,
        path=read.path if leaf == state.leaf_id else _branch_to(leaf, [*read.path, *read.tail]),
        rounds=rounds,
        calls=calls,
        input_stored=input_stored,
        anchor=anchor,
        anchor_rounds=anchor_rounds,
        anchor_calls=anchor_calls,
        owed=unsettled,
        fresh=fresh,
        finished=finished,
    )


def _branch_to(leaf: str | None, entries: Sequence[Any]) -> list[Any]:
    """The root-to-``leaf`` entries, walked up through ``entries`` (the read branch and run
    tail)."""
    by_id = {entry.id: entry for entry in entries}
    path: list[Any] = []
    cursor = leaf
    while cursor is not None:
        node = by_id.get(cursor)
        if node is None:
            raise AgentRunStateError("the checkpoint's session leaf is missing from the session")
        path.append(node)
        cursor = node.parent_id
    path.reverse()
    return path


def _find_calls(path: Sequence[Any], pending: Sequence[PendingCall]) -> dict[str, ToolCallContent]:
    wanted = {call.tool_call_id: call for call in pending}
    found: dict[str, ToolCallContent] = {}
    for entry in reversed(path):
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for call in message.tool_calls:
            if call.id in wanted and call.id not in found:
                # A decided edit records the hash of the arguments the call runs with; the
                # transcript keeps the model's own.
                edited = wanted[call.id].modified_arguments
                arguments = call.arguments if edited is None else edited
                if arguments_hash(arguments) != wanted[call.id].arguments_hash:
                    raise AgentRunStateError(
                        "a pending tool call no longer matches its recorded arguments hash"
                    )
                found[call.id] = call
        if len(found) == len(wanted):
            break
    if len(found) != len(wanted):
        raise AgentRunStateError("a pending tool call is missing from the session branch")
    return found
