"""The tasks without a broker: configuration refusals, task options, retry countdowns, and
the task bodies run eagerly on a SQLite file (one host)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from celery import Celery, signals
from celery.exceptions import Retry

import prism_store_sql
from prism_celery import (
    SESSION_CLAIM_NAMESPACE,
    CeleryConfigError,
    RunTaskError,
    RunTasks,
    create_run_tasks,
)
from prism_celery._config import make_settings
from prism_celery._outcome import RetryLater
from prism_celery._tasks import _runner, retry_countdown
from prism_cli._demo_stores import drop_demo_stores
from prism_core import (
    AgentRunStateError,
    CheckpointConflictError,
    CheckpointStoreUnavailableError,
    RunStateOptions,
    create_memory_checkpoint_store,
    open_checkpoint_store,
    open_session_store,
    resume_agent_run,
)
from tests.conftest import REDIS_URL
from tests.store_plugins import STORE_PLUGINS

from . import agents


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> agents.EffectLog:
    """The effect log the scripted tools write to."""
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("PRISM_CELERY_TEST_EFFECTS", str(path))
    monkeypatch.setenv("PRISM_CELERY_TEST_THINK", "0")
    return agents.EffectLog(path)


@pytest.fixture
def eager(tmp_path: Path, effects: agents.EffectLog) -> Iterator[tuple[RunTasks, str]]:
    """Tasks on an app that runs them in this process, on a SQLite file."""
    app = Celery("prism_celery_eager", broker="memory://", backend="cache+memory://")
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    try:
        yield create_run_tasks(app, resolve_agent=agents.resolve_agent, store_url=url), url
    finally:
        app.close()


def _records(url: str, namespace: str) -> list[Any]:
    async def read() -> list[Any]:
        async with open_checkpoint_store(url, plugins=[prism_store_sql.plugin]) as store:
            return list((await store.list(namespace)).records)

    return anyio.run(read)


#: URLs no other task or worker could open the same store from.
UNSHAREABLE = [
    "memory://",
    "sqlite://",
    "sqlite:///:memory:",
    "sqlite+aiosqlite://",
    "sqlite:///file:runs?mode=memory&uri=true",
    "",
    "no-scheme",
]


@pytest.mark.parametrize("url", [*UNSHAREABLE, None])
def test_a_store_no_other_worker_can_read_is_refused(url: Any) -> None:
    """Process-local and malformed store URLs fail at creation, registering nothing."""
    app = Celery("refused")
    with pytest.raises(CeleryConfigError) as caught:
        create_run_tasks(app, resolve_agent=agents.resolve_agent, store_url=url)
    assert caught.value.code == "ERR_PRISM_CELERY_CONFIG"
    assert not any(name.startswith("prism_celery.") for name in app.tasks)


@pytest.mark.parametrize("url", UNSHAREABLE)
def test_a_session_store_no_other_worker_can_read_is_refused(url: str) -> None:
    """``sessions_url`` is held to the same rule as ``store_url``."""
    app = Celery("refused")
    with pytest.raises(CeleryConfigError):
        create_run_tasks(
            app, resolve_agent=agents.resolve_agent, store_url="sqlite:///x.db", sessions_url=url
        )
    assert not any(name.startswith("prism_celery.") for name in app.tasks)


@pytest.mark.parametrize(
    "options",
    [
        {"lease_ms": 50},
        {"lease_ms": True},
        {"lease_ms": 1.5},
        {"lease_ms": 86_400_001},
        {"resolve_agent": "agents:resolve"},
    ],
)
def test_wrong_options_are_refused(options: dict[str, Any]) -> None:
    """Lease bounds and a callable ``resolve_agent`` are checked before anything registers."""
    app = Celery("refused")
    arguments = {"resolve_agent": agents.resolve_agent, "store_url": "sqlite:///x.db", **options}
    with pytest.raises(CeleryConfigError):
        create_run_tasks(app, **arguments)
    assert not any(name.startswith("prism_celery.") for name in app.tasks)


def test_something_else_than_a_celery_app_is_refused() -> None:
    """The tasks register on a Celery application, nothing else."""
    with pytest.raises(CeleryConfigError, match="Celery application"):
        create_run_tasks(object(), resolve_agent=agents.resolve_agent, store_url="sqlite:///x.db")


def test_the_tasks_set_only_late_acks_and_requeue_on_worker_loss() -> None:
    """Each task acknowledges after it ran and goes back to the queue when its worker dies."""
    app = Celery("options")
    tasks = create_run_tasks(app, resolve_agent=agents.resolve_agent, store_url="sqlite:///x.db")
    for task, name in (
        (tasks.start, "start"),
        (tasks.resume, "resume"),
        (tasks.continue_run, "continue_run"),
        (tasks.sweep, "sweep"),
    ):
        assert task.name == f"prism_celery.{name}"
        assert task.name in app.tasks
        assert task.acks_late is True
        assert task.reject_on_worker_lost is True


def test_retry_countdowns_stay_under_the_visibility_timeout() -> None:
    """A retry waits for the lease, backs off with the retries, and never as long as half the
    broker's visibility timeout, so the waiting message is not delivered twice."""
    app = Celery("countdowns")
    app.conf.broker_transport_options = {"visibility_timeout": 10}
    assert retry_countdown(app, 3.0, 0) == 3.0
    assert retry_countdown(app, 0.0, 0) == 0.5
    assert retry_countdown(app, 0.0, 3) == 4.0
    assert retry_countdown(app, 60.0, 0) == 5.0
    assert retry_countdown(app, 0.0, 50) == 5.0
    default = Celery("defaults")
    assert retry_countdown(default, 45.0, 0) == 45.0
    assert retry_countdown(default, 0.0, 50) == 60.0


def test_start_and_resume_run_eagerly_on_one_host(
    eager: tuple[RunTasks, str], effects: agents.EffectLog
) -> None:
    """On a SQLite file (one host): a run to completion, and a suspension approved later."""
    tasks, url = eager
    done = tasks.start.apply(args=("charger", "s1", "charge")).get()
    assert done["status"] == "succeeded"
    assert tasks.start.apply(args=("charger", "s1", "charge")).get() == done
    assert len(effects.entries()) == 3
    held = tasks.start.apply(args=("deployer", "s2", "ship")).get()
    assert held["status"] == "suspended"
    (record,) = [r for r in _records(url, "prism.agent-run") if r.key == held["run_id"]]
    approved = tasks.resume.apply(
        args=(held["run_id"], {"expected_version": record.version, "decision": "approve"})
    ).get()
    assert approved == {**held, "status": "succeeded"}
    assert tasks.continue_run.apply(args=(held["run_id"],)).get() == approved
    claims = {r.key: r.value["run_id"] for r in _records(url, SESSION_CLAIM_NAMESPACE)}
    assert claims == {"s1": done["run_id"], "s2": held["run_id"]}
    assert len(effects.entries()) == 4
    with pytest.raises(RunTaskError) as caught:
        tasks.start.apply(args=("deployer", "s1", "ship")).get()
    assert caught.value.code == "ERR_PRISM_CELERY_SESSION"
    assert len(_records(url, "prism.agent-run")) == 2


def test_the_sweep_expires_an_overdue_decision_and_continues_its_run(
    eager: tuple[RunTasks, str], effects: agents.EffectLog
) -> None:
    """``sweep`` expires a decision past its deadline (audited ``expired`` by ``prism`` on
    ``kernel``) and enqueues the run it left recoverable; the continue takes the rejection to
    the model and the run succeeds without the held tool running."""
    tasks, url = eager
    held = tasks.start.apply(args=("releaser", "s3", "ship")).get()
    assert held["status"] == "suspended"
    (record,) = [r for r in _records(url, "prism.agent-run") if r.key == held["run_id"]]
    (decision,) = record.value["interruption"]["pending_decisions"]
    deadline = time.monotonic() + 60
    while time.time() <= decision["expires_at"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tasks.sweep.apply().get() == 1
    (record,) = [r for r in _records(url, "prism.agent-run") if r.key == held["run_id"]]
    assert record.value["status"] == "succeeded"
    expired = [a for a in record.value["audit"] if a["outcome"] == "expired"]
    assert [(a["actor"], a["channel"]) for a in expired] == [("prism", "kernel")]
    assert effects.entries() == []
    assert tasks.sweep.apply().get() == 0


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("nobody", "s1", "hi"), "ERR_PRISM_CELERY_AGENT"),
        (("charger", "", "hi"), "ERR_PRISM_CELERY_INPUT"),
        (("charger", "s1", {"text": "hi"}), "ERR_PRISM_CELERY_INPUT"),
        ((7, "s1", "hi"), "ERR_PRISM_CELERY_INPUT"),
    ],
)
def test_a_refused_start_writes_nothing(
    eager: tuple[RunTasks, str], effects: agents.EffectLog, args: tuple[Any, ...], code: str
) -> None:
    """An unknown agent or malformed arguments fail typed, before any claim or run."""
    tasks, url = eager
    with pytest.raises(RunTaskError) as caught:
        tasks.start.apply(args=args).get()
    assert caught.value.code == code
    assert _records(url, SESSION_CLAIM_NAMESPACE) == []
    assert _records(url, "prism.agent-run") == []
    assert effects.entries() == []


def test_continuing_an_unknown_run_fails_typed(eager: tuple[RunTasks, str]) -> None:
    """``continue_run`` and ``resume`` of a run the store does not have fail without retrying."""
    tasks, _ = eager
    for task, args in (
        (tasks.continue_run, ("run_missing",)),
        (tasks.resume, ("run_missing", {"expected_version": 1, "decision": "approve"})),
        (tasks.continue_run, ("",)),
    ):
        with pytest.raises(RunTaskError) as caught:
            task.apply(args=args).get()
        assert caught.value.code in ("ERR_PRISM_CELERY_RUN_NOT_FOUND", "ERR_PRISM_CELERY_INPUT")


def test_an_agent_with_an_owner_scope_is_refused(tmp_path: Path, effects: agents.EffectLog) -> None:
    """Tasks name runs by id alone, so an agent whose runs are owned is refused up front."""

    def owned(agent_id: str) -> tuple[Any, str]:
        run_state = RunStateOptions(
            create_memory_checkpoint_store(), "r1", ownership={"tenant_id": "acme"}
        )
        return agents.charger(run_state=run_state), "r1"

    app = Celery("owned", broker="memory://", backend="cache+memory://")
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    url = f"sqlite:///{tmp_path / 'owned.db'}"
    tasks = create_run_tasks(app, resolve_agent=owned, store_url=url)
    with pytest.raises(RunTaskError) as caught:
        tasks.start.apply(args=("charger", "s9", "hi")).get()
    assert caught.value.code == "ERR_PRISM_CELERY_AGENT"
    assert _records(url, "prism.agent-run") == []
    assert effects.entries() == []
    app.close()


def _retry_raised(run: Any, task: Any, body: Any, **request: Any) -> Retry:
    """The ``Retry`` that ``run(task, body)`` raises inside a delivered task's request."""
    task.push_request(
        id="t-1", args=("run_x",), kwargs={}, delivery_info={}, called_directly=False, **request
    )
    try:
        with pytest.raises(Retry) as caught:
            run(task, body)
    finally:
        task.pop_request()
    return caught.value


@pytest.mark.parametrize(
    "failure",
    [RetryLater(3.0, "leased"), CheckpointStoreUnavailableError("the database did not answer")],
)
def test_a_task_retries_as_often_as_its_run_needs(tmp_path: Path, failure: Exception) -> None:
    """A live lease or an unreachable store re-sends the task with a countdown, even past
    Celery's default of three retries: the task ends when its run does."""
    app = Celery("retries", broker="memory://", backend="cache+memory://")
    app.conf.broker_transport_options = {"visibility_timeout": 60}
    url = f"sqlite:///{tmp_path / 'retries.db'}"
    tasks = create_run_tasks(app, resolve_agent=agents.resolve_agent, store_url=url)
    settings = make_settings(
        resolve_agent=agents.resolve_agent, store_url=url, lease_ms=30000, sessions_url=None
    )

    async def body(stores: Any) -> None:
        raise failure

    retry = _retry_raised(_runner(app, settings), tasks.continue_run, body, retries=5)
    # Five retries so far: a backoff of 16 s, above the 3 s the lease asked for, below 30 s.
    assert retry.when == 16.0
    app.close()


@pytest.mark.parametrize(("propagates", "waits"), [(False, [2.0]), (True, [])])
def test_an_eager_retry_waits_its_countdown_unless_celery_raises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, propagates: bool, waits: list[float]
) -> None:
    """Celery runs a non-propagating eager retry at once, nested in the call: the task waits
    its countdown first. A propagating eager call hands ``Retry`` to its caller at once."""
    app = Celery("eager_retries", broker="memory://", backend="cache+memory://")
    app.conf.update(task_always_eager=True, task_eager_propagates=propagates)
    url = f"sqlite:///{tmp_path / 'eager.db'}"
    tasks = create_run_tasks(app, resolve_agent=agents.resolve_agent, store_url=url)
    settings = make_settings(
        resolve_agent=agents.resolve_agent, store_url=url, lease_ms=30000, sessions_url=None
    )
    slept: list[float] = []
    monkeypatch.setattr("prism_celery._tasks.time.sleep", slept.append)

    async def body(stores: Any) -> None:
        raise RetryLater(2.0, "leased")

    retry = _retry_raised(_runner(app, settings), tasks.continue_run, body, is_eager=True)
    assert retry.when == 2.0
    assert slept == waits
    app.close()


@pytest.mark.long
def test_a_superseded_worker_stops_and_its_task_reports_the_settled_run(
    tmp_path: Path, effects: agents.EffectLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose run another worker claimed (a forced continue here, as after a pause
    longer than the lease) fails its next write and runs no further tool; its task retries
    until the other worker has settled the run, then reports it (an eager retry waits its
    countdown, here the other worker's 2 s lease, instead of spinning)."""
    app = Celery("prism_celery_fenced", broker="memory://", backend="cache+memory://")
    # Not propagating: Celery runs the eager retries in place instead of raising Retry.
    app.conf.update(task_always_eager=True, task_eager_propagates=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    tasks = create_run_tasks(app, resolve_agent=agents.resolve_agent, store_url=url, lease_ms=2000)
    # Five turns of 1.5 s: the other worker claims the run well before it could end, even on
    # a loaded machine where opening the stores takes a while.
    monkeypatch.setenv("PRISM_CELERY_TEST_THINK", "1.5")
    monkeypatch.setenv("PRISM_CELERY_TEST_TURNS", "5")
    outcome: dict[str, Any] = {}
    retried: list[str] = []

    def on_retry(sender: Any = None, reason: Any = None, **_: Any) -> None:
        retried.append(str(reason.exc))

    def first_worker() -> None:
        outcome["result"] = tasks.start.apply(args=("charger", "s-fenced", "charge")).get()

    signals.task_retry.connect(on_retry, sender=tasks.start, weak=False)

    worker = threading.Thread(target=first_worker)
    worker.start()
    deadline = time.monotonic() + 30
    while not effects.entries() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert effects.entries(), "the first worker applied no effect"

    async def take_over() -> str:
        async with (
            open_checkpoint_store(url, plugins=[prism_store_sql.plugin]) as checkpoints,
            open_session_store(url, plugins=[prism_store_sql.plugin]) as sessions,
        ):
            agent = agents.charger()
            agent.store = sessions
            for _ in range(20):
                # A forced claim races the live worker's writes: claim the version just read,
                # and read again when the worker moved on first.
                (record,) = (await checkpoints.list("prism.agent-run")).records
                try:
                    result = await resume_agent_run(
                        agent,
                        {"run_id": record.key},
                        {"expected_version": record.version, "decision": "continue"},
                        checkpoints=checkpoints,
                        definition_revision=agents.REVISION,
                        force=True,
                    )
                except CheckpointConflictError:
                    continue
                except AgentRunStateError:
                    # A stale version is refused as such (the spec's stale resume): retry only
                    # when the worker did write in between, else the refusal stands.
                    now = await checkpoints.load("prism.agent-run", record.key)
                    if now is None or now.version == record.version:
                        raise
                    continue
                return result.status
            raise AssertionError("the forced claim never won against the first worker")

    assert anyio.run(take_over) == "succeeded"
    worker.join(timeout=60)
    assert not worker.is_alive()
    (record,) = _records(url, "prism.agent-run")
    assert outcome["result"]["run_id"] == record.key
    signals.task_retry.disconnect(on_retry, sender=tasks.start)
    assert outcome["result"]["status"] == "succeeded"
    assert any("another worker has the run" in reason for reason in retried), retried
    keys = [e["key"] for e in effects.entries()]
    assert sorted(e["call"] for e in effects.entries()) == [f"call_{i}" for i in range(5)]
    assert len(keys) == len(set(keys))
    app.close()


def test_an_agent_s_own_durable_options_are_kept(tmp_path: Path, effects: agents.EffectLog) -> None:
    """``run_state={"interrupt_before_tool": True}`` on the host's agent (no store, no
    revision) still gates every tool: the tasks add their store, revision, policy and lease."""

    def gated(agent_id: str) -> tuple[Any, str]:
        return agents.charger(run_state={"interrupt_before_tool": True}), agents.REVISION

    app = Celery("gated", broker="memory://", backend="cache+memory://")
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    url = f"sqlite:///{tmp_path / 'gated.db'}"
    tasks = create_run_tasks(app, resolve_agent=gated, store_url=url)
    held = tasks.start.apply(args=("charger", "s1", "charge")).get()
    assert held["status"] == "suspended"
    assert effects.entries() == []
    (record,) = _records(url, "prism.agent-run")
    assert record.value["checkpoint_policy"] == "every-turn"
    assert record.value["lease_ms"] == 30000
    app.close()


@pytest.mark.services
def test_sessions_may_live_in_another_store(
    servers: None, tmp_path: Path, effects: agents.EffectLog
) -> None:
    """``sessions_url`` puts the sessions elsewhere (Redis here) and the checkpoints stay at
    ``store_url`` (a SQLite file): a run, then its approval, each open both."""
    prefix = f"pcel_{uuid.uuid4().hex[:10]}"
    app = Celery("split", broker="memory://", backend="cache+memory://")
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    tasks = create_run_tasks(
        app,
        resolve_agent=agents.resolve_agent,
        store_url=url,
        sessions_url=f"{REDIS_URL}?prefix={prefix}",
    )
    try:
        held = tasks.start.apply(args=("deployer", "s1", "ship")).get()
        (record,) = _records(url, "prism.agent-run")
        approval = {"expected_version": record.version, "decision": "approve"}
        done = tasks.resume.apply(args=(held["run_id"], approval)).get()
        assert done["status"] == "succeeded"
        assert len(effects.entries()) == 1

        async def entries() -> list[Any]:
            import prism_store_redis

            async with open_session_store(
                f"{REDIS_URL}?prefix={prefix}", plugins=[prism_store_redis.plugin]
            ) as sessions:
                return list(await sessions.list("s1"))

        kinds = [entry.kind for entry in anyio.run(entries)]
        assert kinds.count("message") >= 4  # the input, the call, its result, the answer
    finally:
        app.close()
        drop_demo_stores(REDIS_URL, prefix, STORE_PLUGINS)
