"""The JSON-RPC methods by their A2A names on the wire (``message/send``, ``message/stream``,
``tasks/get``, ``tasks/cancel``), as any A2A 0.3 peer sends them: plain HTTP, no SDK."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from ._support import Server, effects


def call(http: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call; its whole response object."""
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    answer = http.post("/", json=body)
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = answer.json()
    assert response["id"] == body["id"]
    return response


def message(parts: list[dict[str, Any]], task_id: str | None = None) -> dict[str, Any]:
    """A 0.3 user message."""
    sent: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": parts,
    }
    if task_id is not None:
        sent["taskId"] = task_id
    return {"message": sent}


def pending(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The pending decisions of a 0.3 task that waits for input."""
    assert task["status"]["state"] == "input-required", task
    [data] = [p["data"] for p in task["status"]["message"]["parts"] if p["kind"] == "data"]
    return list(data["pending_decisions"])


def stream(http: httpx.Client, params: dict[str, Any]) -> list[dict[str, Any]]:
    """``message/stream``: the result of each server-sent event."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "message/stream", "params": params}
    results = []
    with http.stream("POST", "/", json=body, headers={"accept": "text/event-stream"}) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("data:"):
                results.append(json.loads(line[len("data:") :])["result"])
    return results


def test_the_a2a_method_names_on_the_wire(server: Server) -> None:
    refund = f"A-{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=server.base, timeout=30) as http:
        sent = call(http, "message/send", message([{"kind": "text", "text": f"refund {refund}"}]))
        task = sent["result"]
        assert task["kind"] == "task"
        [decision] = pending(task)
        assert decision["tool_name"] == "refund"

        unknown = {"decisions": [{"approval_id": "appr_nope", "outcome": "allow_once"}]}
        refused = call(
            http, "message/send", message([{"kind": "data", "data": unknown}], task["id"])
        )
        assert refused["error"]["code"] == -32602
        assert refused["error"]["data"] == {"code": "ERR_PRISM_DECISION_UNKNOWN"}

        approve = {"decisions": [{"approval_id": decision["approval_id"], "outcome": "allow_once"}]}
        events = stream(http, message([{"kind": "data", "data": approve}], task["id"]))
        kinds = [(e["kind"], e.get("status", {}).get("state")) for e in events]
        assert kinds == [
            ("task", "working"),
            ("status-update", "working"),
            ("status-update", "working"),
            ("artifact-update", None),
            ("status-update", "completed"),
        ]
        assert events[-1]["final"] is True

        got = call(http, "tasks/get", {"id": task["id"]})["result"]
        assert got["status"]["state"] == "completed"
        assert got["contextId"] == task["contextId"]
        [artifact] = got["artifacts"]
        assert artifact["artifactId"] == "answer"
        assert "refunds settled" in artifact["parts"][0]["text"]

        other = call(http, "message/send", message([{"kind": "text", "text": "refund B-1"}]))
        canceled = call(http, "tasks/cancel", {"id": other["result"]["id"]})["result"]
        assert canceled["status"]["state"] == "canceled"
    ran = effects(server.effects)
    assert ran.count(f"refund {refund}") == 1
    assert "refund B-1" not in ran
