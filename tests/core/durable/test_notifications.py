"""Notifications through the outbox (API.md, fourth round, "Approvals fit for money"): a
notifying run's state changes are written as notification records with the checkpoint that
makes them, one per event (``suspended``, ``decided``, ``expired``, ``in_doubt``,
``finished``); a run that notifies nobody writes none; whoever holds the stores delivers them."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    NOTIFICATION_EVENTS,
    Notification,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    decide_agent_run,
    deliver_notifications,
    expire_agent_runs,
    load_agent_run_state,
    resume_agent_run,
    run_worker,
)
from prism_core.durable._outbox import OUTBOX_NAMESPACE
from prism_core.hookspecs import hookimpl
from prism_core.plugins import PluginHost

from ..durable_support import REVISION, CountingStore, by_history, rewrite_as_in_doubt
from ..helpers import text_turn, tool_turn

SCRIPT = [tool_turn(("r1", "refund", {"amount": 900, "order": "A-3"})), text_turn("done")]


class Collect:
    """A notifier that keeps what it is handed; it raises for its first ``fail`` calls."""

    def __init__(self, name: str = "collect", *, events: Any = None, fail: int = 0) -> None:
        self.name = name
        self.events = events
        self.fail = fail
        self.got: list[Notification] = []
        self.calls = 0
        self.changed = anyio.Event()

    async def deliver(self, notification: Notification) -> None:
        self.calls += 1
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the receiver is down")
        self.got.append(notification)
        self.changed.set()

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait (up to 60 s) until ``done()`` holds after a delivery."""
        with anyio.fail_after(60):
            while not done():
                await self.changed.wait()
                self.changed = anyio.Event()


class Desk:
    """A refund desk on memory stores: ``refund`` needs approval."""

    def __init__(self, **tool: Any) -> None:
        self.checkpoints = create_memory_checkpoint_store()
        self.sessions = create_memory_session_store()
        self.log: list[Any] = []
        self.tool = tool

    def agent(self, script: Any = SCRIPT, **run_state: Any) -> Any:
        def refund(args: dict[str, Any], context: Any) -> str:
            self.log.append(args["amount"])
            return "refunded"

        return create_agent(
            id="desk",
            model={"provider": "mock", "model": "m"},
            provider=by_history(script),
            store=self.sessions,
            tools=[ToolDefinition("refund", refund, needs_approval=True, **self.tool)],
            run_state=RunStateOptions(self.checkpoints, REVISION, **run_state)
            if run_state
            else None,
        )

    async def suspend(self, *, notify: bool = True, **options: Any) -> Any:
        result = (
            await self.agent()
            .create_session(id="s1")
            .run(
                "refund A-3",
                run_state=RunStateOptions(self.checkpoints, REVISION, notify=notify, **options),
            )
        )
        assert result.status == "suspended"
        return result

    async def decide(self, run_id: str, resume: dict[str, Any]) -> Any:
        return await decide_agent_run(
            self.agent(),
            {"run_id": run_id},
            resume,
            checkpoints=self.checkpoints,
            definition_revision=REVISION,
        )

    async def continue_(self, run_id: str) -> Any:
        status = await load_agent_run_state(self.checkpoints, {"run_id": run_id})
        assert status is not None
        return await resume_agent_run(
            self.agent(),
            {"run_id": run_id},
            {"expected_version": status.version, "decision": "continue"},
            checkpoints=self.checkpoints,
            definition_revision=REVISION,
        )

    async def outbox(self) -> list[dict[str, Any]]:
        """The notifications waiting in the outbox, oldest first."""
        page = await self.checkpoints.list(OUTBOX_NAMESPACE)
        bodies = [record.value["notification"] for record in page.records]
        return sorted(
            bodies, key=lambda body: (body["version"], NOTIFICATION_EVENTS.index(body["event"]))
        )


def events(bodies: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(body["event"], body["version"], body["status"]) for body in bodies]


@pytest.mark.anyio
async def test_a_suspension_writes_its_notification_with_the_pending_calls_arguments() -> None:
    desk = Desk()
    result = await desk.suspend()
    (body,) = await desk.outbox()
    (pending,) = result.interruption.pending_decisions
    assert body["event"] == "suspended"
    assert body["id"].startswith("ntf_")
    assert (body["run_id"], body["session_id"], body["agent_id"]) == (result.run_id, "s1", "desk")
    assert (body["status"], body["version"]) == ("suspended", result.run_state.version)
    (decision,) = body["pending_decisions"]
    assert decision["approval_id"] == pending.approval_id
    assert (decision["tool_call_id"], decision["tool_name"]) == ("r1", "refund")
    assert decision["arguments"] == {"amount": 900, "order": "A-3"}
    assert len(decision["arguments_hash"]) == 64
    assert "audit" not in body


@pytest.mark.anyio
async def test_arguments_over_the_bound_are_left_out_and_said_so() -> None:
    desk = Desk()
    big = "x" * 20000
    agent = desk.agent([tool_turn(("r1", "refund", {"amount": 1, "note": big})), text_turn("ok")])
    result = await agent.create_session(id="s1").run(
        "go", run_state=RunStateOptions(desk.checkpoints, REVISION, notify=True)
    )
    assert result.status == "suspended"
    (body,) = await desk.outbox()
    (decision,) = body["pending_decisions"]
    assert "arguments" not in decision
    assert "the limit is 16384" in decision["arguments_omitted"]


@pytest.mark.anyio
async def test_a_decision_an_expiry_and_the_end_each_notify_once() -> None:
    """Approve (``decided``, naming the approver), continue (``finished``); another run's
    decision expires (``expired``, actor ``prism``), and its continue ends it."""
    desk = Desk()
    first = await desk.suspend()
    await desk.decide(
        first.run_id,
        {"expected_version": first.run_state.version, "decision": "approve", "actor": "ann"},
    )
    done = await desk.continue_(first.run_id)
    assert done.status == "succeeded"
    assert desk.log == [900]
    bodies = await desk.outbox()
    v = first.run_state.version
    assert events(bodies) == [
        ("suspended", v, "suspended"),
        ("decided", v + 1, "running"),
        ("finished", done.run_state.version, "succeeded"),
    ]
    (record,) = bodies[1]["audit"]
    assert (record["outcome"], record["actor"], record["tool_name"]) == (
        "allow_once",
        "ann",
        "refund",
    )
    assert len({body["id"] for body in bodies}) == 3

    expiring = Desk()
    run = await expiring.suspend(approval_timeout_ms=1000)
    (pending,) = run.interruption.pending_decisions
    assert await expire_agent_runs(expiring.checkpoints, now=pending.expires_at) == 1
    bodies = await expiring.outbox()
    assert [body["event"] for body in bodies] == ["suspended", "expired"]
    (record,) = bodies[1]["audit"]
    assert (record["outcome"], record["actor"], record["channel"]) == ("expired", "prism", "kernel")
    assert bodies[1]["status"] == "running"


@pytest.mark.anyio
async def test_a_deny_is_decided_and_finished_in_one_write() -> None:
    desk = Desk()
    run = await desk.suspend()
    status = await desk.decide(
        run.run_id,
        {"expected_version": run.run_state.version, "decision": "deny", "actor": "bob"},
    )
    assert status.state.status == "denied"
    bodies = await desk.outbox()
    assert events(bodies)[1:] == [
        ("decided", status.version, "denied"),
        ("finished", status.version, "denied"),
    ]


@pytest.mark.anyio
async def test_the_first_of_two_approvers_is_decided_not_a_new_suspension() -> None:
    desk = Desk(approvers=2)
    run = await desk.suspend()
    status = await desk.decide(
        run.run_id,
        {"expected_version": run.run_state.version, "decision": "approve", "actor": "ann"},
    )
    assert status.state.status == "suspended"
    bodies = await desk.outbox()
    assert [body["event"] for body in bodies] == ["suspended", "decided"]
    (still,) = bodies[1]["pending_decisions"]
    assert still["approved_by"] == ["ann"]
    assert still["approvers"] == 2
    assert still["arguments"] == {"amount": 900, "order": "A-3"}


@pytest.mark.anyio
async def test_a_run_that_notifies_nobody_writes_no_notification() -> None:
    desk = Desk()
    run = await desk.suspend(notify=False)
    await desk.decide(
        run.run_id,
        {"expected_version": run.run_state.version, "decision": "approve", "actor": "ann"},
    )
    done = await desk.continue_(run.run_id)
    assert done.status == "succeeded"
    assert await desk.outbox() == []
    record = await desk.checkpoints.load(AGENT_RUN_NAMESPACE, run.run_id)
    assert record is not None
    assert "notify" not in record.value


@pytest.mark.anyio
async def test_a_call_in_doubt_notifies_when_a_worker_leaves_it_and_when_it_is_settled() -> None:
    """The process that ran an approved call died: the worker that finds it in doubt leaves
    the run and writes its ``in_doubt`` notification (once, whichever worker finds it); the
    operator's resolution settles it, with an ``in_doubt`` notification of the receipt."""
    desk = Desk()
    run = await desk.suspend()
    status = await desk.decide(
        run.run_id,
        {"expected_version": run.run_state.version, "decision": "approve", "actor": "ann"},
    )
    await rewrite_as_in_doubt(desk.checkpoints, run.run_id, call_id="r1")
    stop = anyio.Event()
    collect = Collect()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: run_worker(
                checkpoints=desk.checkpoints,
                sessions=desk.sessions,
                resolve_agent=lambda agent_id: (desk.agent(), REVISION),
                poll_ms=20,
                stop=stop,
                notifiers=[collect],
            )
        )
        await collect.until(lambda: any(n.event == "in_doubt" for n in collect.got))
        stop.set()
    (doubt,) = [n for n in collect.got if n.event == "in_doubt"]
    assert doubt.version == status.version + 1
    assert doubt.status == "running"
    assert desk.log == []

    current = await load_agent_run_state(desk.checkpoints, {"run_id": run.run_id})
    assert current is not None
    done = await resume_agent_run(
        desk.agent(),
        {"run_id": run.run_id},
        {
            "expected_version": current.version,
            "decision": "continue",
            "resolutions": [{"tool_call_id": "r1", "outcome": "completed", "result": "ok"}],
        },
        checkpoints=desk.checkpoints,
        definition_revision=REVISION,
    )
    assert done.status == "succeeded"
    settled = [b for b in await desk.outbox() if b["event"] == "in_doubt"]
    (body,) = settled
    assert body["version"] == current.version + 1
    assert [r["outcome"] for r in body["audit"]] == ["in_doubt", "completed"]


@pytest.mark.anyio
async def test_delivery_retries_with_the_same_id_and_backoff_then_deletes() -> None:
    desk = Desk()
    await desk.suspend()
    flaky = Collect(fail=2)
    at = time.time() + 1
    assert await deliver_notifications(desk.checkpoints, [flaky], now=at) == 0
    # Not due again before the backoff (1 s after the first attempt, 2 s after the second).
    assert await deliver_notifications(desk.checkpoints, [flaky], now=at + 0.5) == 0
    assert flaky.calls == 1
    assert await deliver_notifications(desk.checkpoints, [flaky], now=at + 1) == 0
    assert await deliver_notifications(desk.checkpoints, [flaky], now=at + 2.5) == 0
    assert flaky.calls == 2
    assert await deliver_notifications(desk.checkpoints, [flaky], now=at + 3) == 1
    assert flaky.calls == 3
    (got,) = flaky.got
    assert got.attempt == 3
    assert got.event == "suspended"
    assert await desk.checkpoints.list(OUTBOX_NAMESPACE) == await desk.checkpoints.list(
        "nothing-here"
    )


@pytest.mark.anyio
async def test_after_eight_attempts_a_notification_is_kept_as_dead_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    desk = Desk()
    await desk.suspend()
    down = Collect(fail=100)
    at = time.time() + 1
    for attempt in range(1, 9):
        assert await deliver_notifications(desk.checkpoints, [down], now=at) == 0
        at += 2 ** (attempt - 1) + 0.1
    assert down.calls == 8
    assert await deliver_notifications(desk.checkpoints, [down], now=at + 10**6) == 0
    assert down.calls == 8
    (record,) = (await desk.checkpoints.list(OUTBOX_NAMESPACE)).records
    assert record.value["status"] == "dead"
    assert record.value["attempts"] == 8
    assert "the receiver is down" in record.value["last_error"]
    assert any("is dead after 8 attempts" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_a_notifier_that_has_it_is_not_sent_it_again_and_events_filter() -> None:
    desk = Desk()
    run = await desk.suspend()
    await desk.decide(
        run.run_id,
        {"expected_version": run.run_state.version, "decision": "approve", "actor": "ann"},
    )
    steady, flaky = Collect("steady"), Collect("flaky", fail=2)
    only_decided = Collect("decisions", events={"decided"})
    notifiers = [steady, flaky, only_decided]
    at = time.time() + 1
    assert await deliver_notifications(desk.checkpoints, notifiers, now=at) == 0
    assert await deliver_notifications(desk.checkpoints, notifiers, now=at + 60) == 2
    assert [n.event for n in steady.got] == ["suspended", "decided"]
    assert [n.event for n in flaky.got] == ["suspended", "decided"]
    assert [n.event for n in only_decided.got] == ["decided"]
    assert steady.calls == 2


@pytest.mark.anyio
async def test_two_deliverers_never_send_one_notification_at_once() -> None:
    """Both passes list the record; the compare-and-swap claim lets one send it."""
    desk = Desk()
    await desk.suspend()
    sent: list[str] = []

    class Slow:
        name = "slow"

        async def deliver(self, notification: Notification) -> None:
            sent.append(notification.id)
            await anyio.sleep(0.2)

    counts: list[int] = []

    async def one_pass() -> None:
        counts.append(await deliver_notifications(desk.checkpoints, [Slow()]))

    async with anyio.create_task_group() as group:
        group.start_soon(one_pass)
        group.start_soon(one_pass)
    assert len(sent) == 1
    assert sorted(counts) == [0, 1]


@pytest.mark.anyio
async def test_a_claim_left_by_a_dead_deliverer_is_taken_again_with_the_same_id() -> None:
    desk = Desk()
    await desk.suspend()
    (record,) = (await desk.checkpoints.list(OUTBOX_NAMESPACE)).records
    claimed = {**record.value, "status": "delivering", "attempts": 1, "claimed_until": 5.0}
    await desk.checkpoints.save(
        OUTBOX_NAMESPACE,
        record.key,
        claimed,
        version=record.version + 1,
        expected_version=record.version,
    )
    collect = Collect()
    assert await deliver_notifications(desk.checkpoints, [collect], now=4.0) == 0
    assert await deliver_notifications(desk.checkpoints, [collect], now=6.0) == 1
    (got,) = collect.got
    assert got.id == record.key == record.value["notification"]["id"]
    assert got.attempt == 2


@pytest.mark.anyio
async def test_a_store_without_the_batch_or_the_index_still_notifies() -> None:
    """A third-party store with neither ``checkpoint_transaction`` nor a status index: the
    notification is written right after its checkpoint (one save more), and delivered from a
    plain listing that reads past the dead records."""
    desk = Desk()
    store = CountingStore(desk.checkpoints)
    desk.checkpoints = store  # type: ignore[assignment]
    dead = {"status": "dead", "attempts": 8, "due_at": 0.0}
    for n in range(150):
        body = {
            "id": f"ntf_dead{n:03d}",
            "event": "finished",
            "run_id": "gone",
            "session_id": "s",
            "agent_id": "a",
            "status": "succeeded",
            "version": 1,
            "occurred_at": 0.0,
        }
        await store.inner.save(
            OUTBOX_NAMESPACE, f"ntf_0dead{n:03d}", {**dead, "notification": body}, version=1
        )
    before = store.saves
    run = await desk.suspend()
    assert store.saves == before + 2  # the suspension, then its notification
    collect = Collect()
    assert await deliver_notifications(store, [collect]) == 1
    (got,) = collect.got
    assert (got.event, got.run_id) == ("suspended", run.run_id)


class PagerPlugin:
    """A third party's plugin: its notifier pages someone."""

    def __init__(self) -> None:
        self.pager = Collect("pager", events={"suspended"})

    @hookimpl
    def prism_notifiers(self) -> list[Any]:
        return [self.pager]


async def _worker_until(
    desk: Desk, notifiers: list[Any], watched: Collect, done: Callable[[], bool]
) -> None:
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: run_worker(
                checkpoints=desk.checkpoints,
                sessions=desk.sessions,
                resolve_agent=lambda agent_id: (desk.agent(), REVISION),
                poll_ms=20,
                stop=stop,
                notifiers=notifiers,
            )
        )
        await watched.until(done)
        stop.set()


@pytest.mark.anyio
async def test_a_plugins_notifier_is_delivered_to_by_a_worker() -> None:
    plugin = PagerPlugin()
    notifiers = PluginHost([plugin]).notifiers()
    assert notifiers == [plugin.pager]
    desk = Desk()
    run = await desk.suspend()
    await _worker_until(desk, notifiers, plugin.pager, lambda: bool(plugin.pager.got))
    (paged,) = plugin.pager.got
    assert (paged.event, paged.run_id) == ("suspended", run.run_id)


@pytest.mark.anyio
async def test_a_worker_with_notifiers_makes_the_runs_it_continues_notify() -> None:
    """A run started without notifications and decided elsewhere: the worker that has
    notifiers continues it, and its end is notified."""
    desk = Desk()
    run = await desk.suspend(notify=False)
    await desk.decide(
        run.run_id,
        {"expected_version": run.run_state.version, "decision": "approve", "actor": "ann"},
    )
    assert await desk.outbox() == []
    collect = Collect()
    await _worker_until(desk, [collect], collect, lambda: bool(collect.got))
    (finished,) = collect.got
    assert (finished.event, finished.status) == ("finished", "succeeded")
    assert desk.log == [900]


def test_a_notifier_without_deliver_is_refused_before_anything_runs() -> None:
    from prism_core import NotifierConfigError
    from prism_core.workers import WorkerConfigError

    with pytest.raises(NotifierConfigError):
        anyio.run(lambda: deliver_notifications(create_memory_checkpoint_store(), [object()]))
    for notifier, said in ((object(), "deliver"), (Collect(events={"paged"}), "unknown: paged")):
        with pytest.raises(WorkerConfigError, match=said):
            anyio.run(
                functools.partial(
                    run_worker,
                    checkpoints=create_memory_checkpoint_store(),
                    sessions=create_memory_session_store(),
                    resolve_agent=lambda agent_id: None,
                    notifiers=[notifier],
                )
            )
