"""A teammate decides a colleague's run on every face, and the audit names who and where.

``authorize`` answers ``Principal({"tenant_id": "acme"}, actor=NAME)``: ana starts a refund,
bob approves it. On the JSON API (HTTP), the console (Chromium clicking its button), AG-UI
(the official ``@ag-ui/client``) and A2A (the official ``a2a-sdk`` client) the approval is
accepted (the actor is never part of the ownership match), recorded with bob's name and the
face's channel, and the refund's tool is told ana started the run and bob approved it. A
body's own ``actor`` or ``channel`` changes nothing. The agent waits before its tools by its
own ``run_state``, which every face keeps while hosting it (A2A refused such an agent before).
"""

from __future__ import annotations

import anyio
import httpx
import pytest
from a2a.types import TaskState

from tests.a2a._support import (
    a2a_client,
    cancel_task,
    decisions,
    get_task,
    pending_of,
    send,
    task_id_of,
    text_message,
)
from tests.agui._support import new_thread, prism_run_id, run_client
from tests.server._browser import chromium, wait_for_result

from ._support import Server, audit, bearer, order, receipts, start_as, stored
from .agents import read_effects


def _refunds(server: Server, refunded: str) -> list[dict[str, object]]:
    return [line for line in read_effects(server.effects) if line["order"] == refunded]


def test_a_teammate_approves_over_the_json_api(server: Server) -> None:
    """bob's approval of ana's run through ``POST /api/runs/{id}/resume`` is audited as bob on
    the ``api`` channel, whatever actor and channel the body names."""
    refunded = order()
    run_id, version = start_as(server.db, server.effects, "ana", f"refund {refunded}")
    body = {"expected_version": version, "decision": "approve", "actor": "cfo", "channel": "cli"}
    answer = httpx.post(
        f"{server.base}/api/runs/{run_id}/resume", json=body, headers=bearer("bob"), timeout=60
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded"
    assert audit(server.db, run_id) == [("bob", "api", "allow_once")]
    assert receipts(server.db, run_id) == [("worker", "executed")]
    assert _refunds(server, refunded) == [
        {"order": refunded, "started_by": "ana", "approvals": [["bob", "api", "allow_once"]]}
    ]


def test_a_teammate_approves_in_the_console(server: Server) -> None:
    """bob opens ana's run in the console (Chromium, bob's credentials) and clicks Approve:
    the decision is bob's, on the ``console`` channel."""
    refunded = order()
    run_id, _ = start_as(server.db, server.effects, "ana", f"refund {refunded}")
    with chromium() as browser:
        context = browser.new_context(extra_http_headers={"Authorization": "Bearer bob"})
        try:
            page = context.new_page()
            page.goto(f"{server.base}/runs/{run_id}")
            page.get_by_role("button", name="Approve", exact=True).click()
            assert "succeeded" in wait_for_result(page)
            page.goto(f"{server.base}/runs/{run_id}")
            cells = page.locator("section.audit tbody tr").nth(0).locator("td").all_inner_texts()
        finally:
            context.close()
    assert cells[1:4] == ["bob", "refund call-1", "approved (allow_once)"]
    assert audit(server.db, run_id) == [("bob", "console", "allow_once")]
    assert _refunds(server, refunded) == [
        {"order": refunded, "started_by": "ana", "approvals": [["bob", "console", "allow_once"]]}
    ]


def test_a_teammate_approves_over_agui(server: Server) -> None:
    """ana's ``@ag-ui/client`` run ends on an interrupt; bob's client, holding that interrupt,
    answers it: the run is ana's, the approval bob's on the ``agui`` channel."""
    url = f"{server.base}/agui/"
    thread = new_thread()
    refunded = order()
    started = run_client(url, thread, [{"message": f"refund {refunded}"}], headers=bearer("ana"))
    (interrupt,) = started.interrupts(0)
    run_id = prism_run_id(started, 0)
    assert stored(server.db, run_id).state.started_by == "ana"
    answered = run_client(
        url,
        thread,
        [
            {
                "answers": {
                    interrupt["toolCallId"]: {"status": "resolved", "payload": {"approved": True}}
                }
            }
        ],
        headers=bearer("bob"),
        pending_interrupts=[interrupt],
    )
    assert answered.finished(0)["outcome"] == {"type": "success"}
    assert audit(server.db, run_id) == [("bob", "agui", "allow_once")]
    assert _refunds(server, refunded) == [
        {"order": refunded, "started_by": "ana", "approvals": [["bob", "agui", "allow_once"]]}
    ]


@pytest.mark.anyio
async def test_a_teammate_approves_over_a2a(server: Server) -> None:
    """ana's task (the official ``a2a-sdk`` client) waits for input; bob's client sends the
    decision on that task: the task completes, the approval bob's on the ``a2a`` channel."""
    refunded = order()
    async with a2a_client(f"{server.base}/a2a", headers=bearer("ana")) as ana:
        task_id = task_id_of(await send(ana, text_message(f"refund {refunded}")))
        (pending,) = pending_of(await get_task(ana, task_id))
    async with a2a_client(f"{server.base}/a2a", headers=bearer("bob")) as bob:
        entry = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
        await send(bob, decisions(task_id, [entry]))
        done = await get_task(bob, task_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    found = await anyio.to_thread.run_sync(stored, server.db, task_id)
    assert (found.state.started_by, found.state.status) == ("ana", "succeeded")
    assert await anyio.to_thread.run_sync(audit, server.db, task_id) == [
        ("bob", "a2a", "allow_once")
    ]
    assert _refunds(server, refunded) == [
        {"order": refunded, "started_by": "ana", "approvals": [["bob", "a2a", "allow_once"]]}
    ]


@pytest.mark.anyio
async def test_a2a_cancel_is_audited_as_the_caller(server: Server) -> None:
    """A cancel is a decision too (the run's ``deny``): bob's cancel of ana's task is his."""
    refunded = order()
    async with a2a_client(f"{server.base}/a2a", headers=bearer("ana")) as ana:
        task_id = task_id_of(await send(ana, text_message(f"refund {refunded}")))
    async with a2a_client(f"{server.base}/a2a", headers=bearer("bob")) as bob:
        await cancel_task(bob, task_id)
    found = await anyio.to_thread.run_sync(stored, server.db, task_id)
    assert found.state.status == "denied"
    assert [(r.actor, r.channel, r.outcome) for r in found.audit] == [("bob", "a2a", "deny")]
    assert _refunds(server, refunded) == []
