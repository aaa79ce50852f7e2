"""A sub-agent's events reach the AG-UI client under its parent's run: a step named after the
child run, the child's tool calls (ids prefixed with its run id) and its answer, then the
parent's own answer; through the official client, which checks the event order."""

from __future__ import annotations

import json

from ._support import Host, Server, new_thread, read_runs, run_client

T1 = {"tenant_id": "t1"}


def test_a_child_runs_events_stream_under_the_parent_run(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(f"{server.url}/assistant/", thread, [{"message": "research A-9"}])
    types = run.types(0)
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    events = run.events(0)
    assert run.end(0)["end"] == "resolved"
    steps = [e for e in events if e["type"] in ("STEP_STARTED", "STEP_FINISHED")]
    assert [e["type"] for e in steps] == ["STEP_STARTED", "STEP_FINISHED"]
    step = steps[0]["stepName"]
    assert steps[1]["stepName"] == step
    assert step.startswith("sub-agent run run_")
    child_run = step.removeprefix("sub-agent run ")
    inside = events[events.index(steps[0]) + 1 : events.index(steps[1])]
    starts = [e for e in inside if e["type"] == "TOOL_CALL_START"]
    assert [(e["toolCallId"], e["toolCallName"]) for e in starts] == [
        (f"{child_run}/call-1-0", "lookup")
    ]
    results = {e["toolCallId"]: e["content"] for e in inside if e["type"] == "TOOL_CALL_RESULT"}
    assert json.loads(results[f"{child_run}/call-1-0"]) == {"order": "A-9", "status": "shipped"}
    child_text = "".join(e["delta"] for e in inside if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert child_text.startswith("Done: lookup -> ")
    # The parent's own call and answer come outside the step.
    outside = [e for e in events if e not in inside]
    parent_call = next(e for e in outside if e["type"] == "TOOL_CALL_START")
    assert (parent_call["toolCallId"], parent_call["toolCallName"]) == ("call-1-0", "researcher")
    assert run.end(0)["messages"][-1]["content"].startswith("Done: researcher -> ")
    runs = read_runs(shared_host, thread, T1)
    assert len(runs) == 1
