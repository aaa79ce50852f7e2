"""Text, tool calls, failures and a client that aborts, through the official AG-UI client
(``@ag-ui/client``'s ``HttpAgent`` on Node) against the app under uvicorn, on SQLite."""

from __future__ import annotations

import json
from pathlib import Path

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

T1 = {"tenant_id": "t1"}


def test_text_streams_as_one_assistant_message(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(f"{server.url}/assistant/", thread, [{"message": "hello"}])
    assert run.types(0) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    events = run.events(0)
    started, finished = events[0], events[-1]
    assert started["threadId"] == finished["threadId"] == thread
    assert started["runId"] == finished["runId"]
    assert started["protocolVersion"] == "1.0"
    assert finished["outcome"] == {"type": "success"}
    message_ids = {e["messageId"] for e in events[1:-1]}
    assert len(message_ids) == 1
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == (
        "Hello, how can I help?"
    )
    end = run.end(0)
    assert end["end"] == "resolved"
    assert [(m["role"], m["content"]) for m in end["messages"]] == [
        ("user", "hello"),
        ("assistant", "Hello, how can I help?"),
    ]
    # The thread is the Prism session; the run is durable, owned by the caller.
    runs = read_runs(shared_host, thread, T1)
    assert list(runs) == [prism_run_id(run, 0)]
    state = next(iter(runs.values()))
    assert state["status"] == "succeeded"
    assert state["checkpoint_policy"] == "every-turn"
    assert read_runs(shared_host, thread, None) == {}
    assert read_runs(shared_host, thread, {"tenant_id": "t2"}) == {}


def test_a_tool_call_streams_runs_and_returns_its_result(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(f"{server.url}/assistant/", thread, [{"message": "lookup A-7"}])
    assert run.types(0) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    events = run.events(0)
    start = events[1]
    assert start["toolCallId"] == "call-1-0"
    assert start["toolCallName"] == "lookup"
    assert start["parentMessageId"]
    arguments = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(arguments) == {"order": "A-7"}
    result = events[5]
    assert result["toolCallId"] == "call-1-0"
    assert result["role"] == "tool"
    assert json.loads(result["content"]) == {"order": "A-7", "status": "shipped"}
    assert shared_host.effects(thread) == [("lookup", {"order": "A-7"})]
    # The client folded the events into the messages of the conversation.
    messages = run.end(0)["messages"]
    call_message = next(m for m in messages if m.get("toolCalls"))
    assert call_message["id"] == start["parentMessageId"]
    assert call_message["toolCalls"][0]["function"]["name"] == "lookup"
    assert json.loads(call_message["toolCalls"][0]["function"]["arguments"]) == {"order": "A-7"}
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert tool_message["toolCallId"] == "call-1-0"
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"].startswith("Done: lookup -> ")


def test_the_thread_keeps_its_history_across_runs(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(
        f"{server.url}/assistant/", thread, [{"message": "hello"}, {"message": "lookup A-8"}]
    )
    # The second run is the second user message of the session: its call ids say so.
    assert run.events(1)[1]["toolCallId"] == "call-2-0"
    runs = read_runs(shared_host, thread, T1)
    assert set(runs) == {prism_run_id(run, 0), prism_run_id(run, 1)}
    assert {state["status"] for state in runs.values()} == {"succeeded"}


def test_a_failed_run_ends_with_run_error(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(f"{server.url}/assistant/", thread, [{"message": "fail"}])
    assert run.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    error = run.error(0)
    assert error["code"] == "model_down"
    assert error["message"] == "the model is unavailable"
    (state,) = read_runs(shared_host, thread, T1).values()
    assert state["status"] == "failed"


def test_a_client_that_leaves_stops_watching_and_the_run_goes_on(
    server: Server, shared_host: Host, tmp_path: Path
) -> None:
    """The client aborts its request while the tool runs: only the watching stops. The run
    goes on in the app's own task, the tool finishes once and the run succeeds (aborting it
    mid-tool would leave an effect nobody recorded)."""
    thread = new_thread()
    url = f"{server.url}/assistant/"
    # The client aborts once the tool is running (TOOL_CALL_END comes before the dispatch).
    go = tmp_path / "abort"
    client = start_client(
        url,
        thread,
        [{"message": "briefly", "abortOn": "TOOL_CALL_END", "abortWhenExists": str(go)}],
    )
    try:
        wait_for(lambda: shared_host.effects(thread) == [("wait-started", {"seconds": 2})])
    finally:
        go.touch()
    run = client_output(client)
    assert run.types(0)[:4] == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    run_id = prism_run_id(run, 0)
    wait_for(lambda: read_runs(shared_host, thread, T1)[run_id]["status"] != "running")
    assert read_runs(shared_host, thread, T1)[run_id]["status"] == "succeeded"
    assert shared_host.effects(thread) == [
        ("wait-started", {"seconds": 2}),
        ("wait-finished", {"seconds": 2}),
    ]
    # The thread takes the next message.
    again = run_client(url, thread, [{"message": "hello"}])
    assert again.finished(0)["outcome"] == {"type": "success"}
