"""Suspensions as AG-UI interrupts and resumes as decision batches, through the official
client (``HttpAgent`` on Node): approve, reject, edit, two interrupts in one round, an
elicitation, and every refusal (unknown, stale, replayed, invalid) leaving the interrupt
answerable with nothing run."""

from __future__ import annotations

import json
from typing import Any

from prism_agui import APPROVAL_SCHEMA, CANCELLED_REASON

from ._support import Host, Server, new_thread, prism_run_id, read_runs, run_client

T1 = {"tenant_id": "t1"}
#: The elicitation schema of the host's ``confirm`` tool.
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"approved_by": {"type": "string"}},
    "required": ["approved_by"],
}


def _approve(**payload: Any) -> dict[str, Any]:
    return {"status": "resolved", "payload": {"approved": True, **payload}}


def _reject(reason: str) -> dict[str, Any]:
    return {"status": "resolved", "payload": {"approved": False, "reason": reason}}


def _entry(interrupt: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], **answer}


def _billing(server: Server) -> str:
    return f"{server.url}/billing/"


def test_a_gated_call_streams_as_a_tool_call_then_the_run_ends_on_its_interrupt(
    server: Server, shared_host: Host
) -> None:
    thread = new_thread()
    run = run_client(_billing(server), thread, [{"message": "refund A-1"}])
    assert run.types(0) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    start = run.events(0)[4]
    assert (start["toolCallId"], start["toolCallName"]) == ("call-1-0", "refund")
    assert json.loads(run.events(0)[5]["delta"]) == {"order": "A-1"}
    (interrupt,) = run.interrupts(0)
    (state,) = read_runs(shared_host, thread, T1).values()
    assert state["status"] == "suspended"
    (pending,) = state["interruption"]["pending_decisions"]
    assert interrupt["id"] == pending["approval_id"]
    assert interrupt["toolCallId"] == "call-1-0"
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["responseSchema"] == {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "arguments": {"type": "object"},
            "reason": {"type": "string"},
        },
        "required": ["approved"],
    }
    assert interrupt["responseSchema"] == APPROVAL_SCHEMA
    assert "refund" in interrupt["message"]
    assert '"A-1"' in interrupt["message"]
    # The client keeps it as the thread's open interrupt; nothing ran.
    assert run.end(0)["pendingInterrupts"] == [interrupt]
    assert shared_host.effects(thread) == []


def test_approve_resumes_the_same_run_and_the_tool_runs_once(
    server: Server, shared_host: Host
) -> None:
    thread = new_thread()
    run = run_client(
        _billing(server),
        thread,
        [{"message": "refund A-1"}, {"answers": {"call-1-0": _approve()}}],
    )
    # The decided run runs in a worker and is watched from the stores: its answer arrives
    # as the stored message, one content event.
    assert run.types(1) == [
        "RUN_STARTED",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    result = run.events(1)[1]
    assert result["toolCallId"] == "call-1-0"
    assert json.loads(result["content"]) == {"refunded": "A-1"}
    assert run.finished(1)["outcome"] == {"type": "success"}
    assert prism_run_id(run, 1) == prism_run_id(run, 0)
    assert run.end(1)["pendingInterrupts"] == []
    assert shared_host.effects(thread) == [("refund", {"order": "A-1"})]
    (state,) = read_runs(shared_host, thread, T1).values()
    assert state["status"] == "succeeded"


def test_reject_continues_the_run_with_the_reason_and_runs_nothing(
    server: Server, shared_host: Host
) -> None:
    thread = new_thread()
    run = run_client(
        _billing(server),
        thread,
        [{"message": "refund A-1"}, {"answers": {"call-1-0": _reject("not this order")}}],
    )
    result = run.events(1)[1]
    assert result["type"] == "TOOL_CALL_RESULT"
    assert result["toolCallId"] == "call-1-0"
    assert "not this order" in result["content"]
    assert run.finished(1)["outcome"] == {"type": "success"}
    assert run.end(1)["messages"][-1]["content"] == "Done: refund -> error"
    assert shared_host.effects(thread) == []


def test_an_edit_runs_the_edited_arguments(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(
        _billing(server),
        thread,
        [
            {"message": "refund A-1"},
            {"answers": {"call-1-0": _approve(arguments={"order": "B-2"})}},
        ],
    )
    result = run.events(1)[1]
    assert json.loads(result["content"]) == {"refunded": "B-2"}
    assert shared_host.effects(thread) == [("refund", {"order": "B-2"})]


def test_cancelling_an_interrupt_rejects_its_call(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(
        _billing(server),
        thread,
        [{"message": "refund A-1"}, {"answers": {"call-1-0": {"status": "cancelled"}}}],
    )
    result = run.events(1)[1]
    assert result["type"] == "TOOL_CALL_RESULT"
    assert CANCELLED_REASON in result["content"]
    assert run.finished(1)["outcome"] == {"type": "success"}
    assert shared_host.effects(thread) == []


def test_two_interrupts_of_one_round_resolve_as_one_batch(
    server: Server, shared_host: Host
) -> None:
    thread = new_thread()
    run = run_client(
        _billing(server),
        thread,
        [
            {"message": "refund A-1 A-2"},
            {
                "answers": {
                    "call-1-0": _approve(),
                    "call-1-1": _reject("A-2 was never paid"),
                }
            },
        ],
    )
    # Every call of the round is streamed and closed before the run ends on its interrupts.
    assert run.types(0) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    first = run.events(0)
    starts = [e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START"]
    ends = [e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_END"]
    assert starts == ends == ["call-1-0", "call-1-1"]
    interrupts = run.interrupts(0)
    assert [i["toolCallId"] for i in interrupts] == ["call-1-0", "call-1-1"]
    assert len({i["id"] for i in interrupts}) == 2
    results = {
        e["toolCallId"]: e["content"] for e in run.events(1) if e["type"] == "TOOL_CALL_RESULT"
    }
    assert json.loads(results["call-1-0"]) == {"refunded": "A-1"}
    assert "A-2 was never paid" in results["call-1-1"]
    assert shared_host.effects(thread) == [("refund", {"order": "A-1"})]
    (state,) = read_runs(shared_host, thread, T1).values()
    assert state["status"] == "succeeded"


def test_an_elicitation_is_answered_through_its_response_schema(
    server: Server, shared_host: Host
) -> None:
    thread = new_thread()
    answer = {"status": "resolved", "payload": {"approved_by": "Ana"}}
    run = run_client(
        _billing(server), thread, [{"message": "confirm"}, {"answers": {"call-1-0": answer}}]
    )
    (interrupt,) = run.interrupts(0)
    assert interrupt["reason"] == "elicitation"
    assert interrupt["responseSchema"] == CONFIRM_SCHEMA
    assert interrupt["toolCallId"] == "call-1-0"
    result = run.events(1)[1]
    assert result["type"] == "TOOL_CALL_RESULT"
    assert json.loads(result["content"]) == {"approved_by": "Ana"}
    # The answer resolves the call: the tool itself does not run.
    assert shared_host.effects(thread) == []


def _suspended(server: Server, thread: str, message: str = "refund A-1") -> list[dict[str, Any]]:
    return run_client(_billing(server), thread, [{"message": message}]).interrupts(0)


def _refused_then_answerable(
    server: Server,
    host: Host,
    thread: str,
    resume: list[dict[str, Any]],
    code: str,
) -> None:
    """``resume`` is refused with ``code`` and runs nothing; the run stays suspended at the
    same version, and its interrupt still resolves (the tool then runs once)."""
    (before,) = read_runs(host, thread, T1).values()
    refused = run_client(_billing(server), thread, [{"resume": resume}])
    assert refused.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused.error(0)["code"] == code
    (after,) = read_runs(host, thread, T1).values()
    assert (after["status"], after["version"]) == ("suspended", before["version"])
    assert host.effects(thread) == []
    (interrupt,) = after["interruption"]["pending_decisions"]
    done = run_client(
        _billing(server),
        thread,
        [{"resume": [{"interruptId": interrupt["approval_id"], **_approve()}]}],
    )
    assert done.finished(0)["outcome"] == {"type": "success"}
    assert host.effects(thread) == [("refund", {"order": "A-1"})]


def test_an_unknown_interrupt_id_refuses_the_whole_batch(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    (interrupt,) = _suspended(server, thread)
    resume = [
        _entry(interrupt, _approve()),
        {"interruptId": "appr_not_a_real_one", **_approve()},
    ]
    _refused_then_answerable(server, shared_host, thread, resume, "ERR_PRISM_DECISION_UNKNOWN")


def test_an_edit_that_fails_the_tool_schema_is_refused(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    (interrupt,) = _suspended(server, thread)
    resume = [_entry(interrupt, _approve(arguments={"order": "not an order"}))]
    _refused_then_answerable(server, shared_host, thread, resume, "ERR_PRISM_DECISION_INVALID")


def test_a_payload_the_endpoint_cannot_read_is_refused(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    (interrupt,) = _suspended(server, thread)
    # An edit under another name must not approve the original arguments.
    edit = {"status": "resolved", "payload": {"approved": True, "editedArgs": {"order": "B-1"}}}
    _refused_then_answerable(
        server, shared_host, thread, [_entry(interrupt, edit)], "ERR_PRISM_DECISION_INVALID"
    )


def test_continue_is_not_reachable_from_a_resume_entry(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    (interrupt,) = _suspended(server, thread)
    sneaky = {"status": "resolved", "payload": {"decision": "continue"}}
    _refused_then_answerable(
        server, shared_host, thread, [_entry(interrupt, sneaky)], "ERR_PRISM_DECISION_INVALID"
    )


def test_a_replayed_resume_is_refused_and_runs_nothing_again(
    server: Server, shared_host: Host
) -> None:
    thread = new_thread()
    (interrupt,) = _suspended(server, thread)
    resume = [_entry(interrupt, _approve())]
    first = run_client(_billing(server), thread, [{"resume": resume}, {"resume": resume}])
    assert first.finished(0)["outcome"] == {"type": "success"}
    assert first.types(1) == ["RUN_STARTED", "RUN_ERROR"]
    assert first.error(1)["code"] == "ERR_PRISM_AGENT_RUN_STATE"
    assert shared_host.effects(thread) == [("refund", {"order": "A-1"})]


def test_a_stale_interrupt_of_an_earlier_run_is_refused(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    (old,) = _suspended(server, thread)
    done = run_client(_billing(server), thread, [{"resume": [_entry(old, _approve())]}])
    assert done.finished(0)["outcome"] == {"type": "success"}
    (current,) = _suspended(server, thread, "refund A-3")
    stale = run_client(_billing(server), thread, [{"resume": [_entry(old, _approve())]}])
    assert stale.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert stale.error(0)["code"] == "ERR_PRISM_DECISION_UNKNOWN"
    assert shared_host.effects(thread) == [("refund", {"order": "A-1"})]
    # The current interrupt is untouched and still answerable.
    answered = run_client(_billing(server), thread, [{"resume": [_entry(current, _approve())]}])
    assert answered.finished(0)["outcome"] == {"type": "success"}
    assert shared_host.effects(thread) == [
        ("refund", {"order": "A-1"}),
        ("refund", {"order": "A-3"}),
    ]


def test_a_new_message_while_interrupts_wait_is_refused(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    (interrupt,) = _suspended(server, thread)
    # A fresh client (no pending interrupts of its own) sends a plain message.
    run = run_client(_billing(server), thread, [{"message": "refund A-9"}])
    assert run.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert run.error(0)["code"] == "ERR_PRISM_AGUI_INTERRUPT_PENDING"
    (state,) = read_runs(shared_host, thread, T1).values()
    assert state["status"] == "suspended"
    assert state["interruption"]["pending_decisions"][0]["approval_id"] == interrupt["id"]
    assert shared_host.effects(thread) == []


def test_the_client_refuses_to_leave_an_interrupt_unanswered(server: Server) -> None:
    thread = new_thread()
    run = run_client(_billing(server), thread, [{"message": "refund A-1"}, {"message": "hi"}])
    (interrupt,) = run.interrupts(0)
    # The official client's own rule: every open interrupt is answered by the next run.
    end = run.end(1)
    assert end["end"] == "rejected"
    assert interrupt["id"] in end["error"]
    assert run.events(1) == []
