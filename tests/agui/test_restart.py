"""A server SIGKILLed and replaced by a new process on the same SQLite stores, through the
official client: an interrupt survives and its tool runs once; a run killed inside a tool is
never continued from AG-UI (only the host continues a crashed run)."""

from __future__ import annotations

import pytest

from ._support import (
    Host,
    Server,
    client_output,
    new_thread,
    prism_run_id,
    read_runs,
    run_client,
    start_client,
    wait_for,
)

pytestmark = pytest.mark.long

T1 = {"tenant_id": "t1"}
APPROVE = {"status": "resolved", "payload": {"approved": True}}


def test_an_interrupt_outlives_a_killed_server_and_its_tool_runs_once(host: Host) -> None:
    thread = new_thread()
    first = Server(host)
    try:
        asked = run_client(f"{first.url}/billing/", thread, [{"message": "refund A-1 A-2"}])
    finally:
        first.kill()
    interrupts = asked.interrupts(0)
    assert [i["toolCallId"] for i in interrupts] == ["call-1-0", "call-1-1"]
    assert host.effects(thread) == []

    second = Server(host)
    try:
        # The page kept its open interrupts; a new server process answers them.
        resumed = run_client(
            f"{second.url}/billing/",
            thread,
            [{"answers": {"call-1-0": APPROVE, "call-1-1": APPROVE}}],
            pending_interrupts=interrupts,
        )
    finally:
        second.kill()
    results = [e["toolCallId"] for e in resumed.events(0) if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["call-1-0", "call-1-1"]
    assert resumed.finished(0)["outcome"] == {"type": "success"}
    assert prism_run_id(resumed, 0) == prism_run_id(asked, 0)
    assert host.effects(thread) == [("refund", {"order": "A-1"}), ("refund", {"order": "A-2"})]

    third = Server(host)
    try:
        replay = [{"interruptId": i["id"], **APPROVE} for i in interrupts]
        replayed = run_client(f"{third.url}/billing/", thread, [{"resume": replay}])
    finally:
        third.stop()
    assert replayed.error(0)["code"] == "ERR_PRISM_AGENT_RUN_STATE"
    assert host.effects(thread) == [("refund", {"order": "A-1"}), ("refund", {"order": "A-2"})]


def test_a_run_killed_inside_a_tool_is_never_continued_from_agui(host: Host) -> None:
    thread = new_thread()
    first = Server(host)
    client = start_client(f"{first.url}/assistant/", thread, [{"message": "slow"}])
    try:
        wait_for(lambda: host.effects(thread) == [("wait-started", {})])
    finally:
        first.kill()
        cut = client_output(client)
    # The client saw the call, then the connection drop: no end of the run.
    assert cut.types(0) == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert cut.end(0)["end"] == "rejected"
    (run_id, before), *_ = read_runs(host, thread, T1).items()
    assert before["status"] == "running"
    assert [c["status"] for c in before["pending_calls"]] == ["dispatched"]

    second = Server(host)
    try:
        url = f"{second.url}/assistant/"
        fresh = run_client(url, thread, [{"message": "hello"}])
        guess = run_client(url, thread, [{"resume": [{"interruptId": "appr_anything", **APPROVE}]}])
    finally:
        second.stop()
    assert fresh.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert fresh.error(0)["code"] == "ERR_PRISM_AGUI_RUN_ACTIVE"
    # Decisions never continue a running run, whatever the entry says.
    assert guess.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert guess.error(0)["code"] == "ERR_PRISM_AGENT_RUN_STATE"
    after = read_runs(host, thread, T1)
    assert list(after) == [run_id]
    assert (after[run_id]["status"], after[run_id]["version"]) == ("running", before["version"])
    assert host.effects(thread) == [("wait-started", {})]
