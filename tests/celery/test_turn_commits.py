"""Commits per turn of a Celery ``start`` task, counted at the database driver.

The task runs eagerly in this process on a SQLite file. Every ``sqlite3`` connection the task
opens gets a trace callback (``sqlite3.connect`` is wrapped for the test) that counts each
``COMMIT`` and each write statement run outside a transaction (autocommit), as
``tests/store_sql/test_turn_commits.py`` counts them on one connection. The agent runs eight
turns that each call an idempotent tool, then answers: nine turns in all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from prism_celery import create_run_tasks
from prism_core import create_agent, create_mock_provider
from tests.core.helpers import echo_tool, text_turn, tool_turn

TOOL_TURNS = 8
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class Commits:
    """The commits of every ``sqlite3`` connection opened while it is installed."""

    def __init__(self) -> None:
        self.count = 0
        self.connections = 0

    def watch(self, connection: sqlite3.Connection) -> None:
        """Count ``connection``'s commits from now on."""
        self.connections += 1

        def trace(statement: str) -> None:
            head = statement.lstrip().split(None, 1)[0].upper()
            if head == "COMMIT" or (head in WRITES and not connection.in_transaction):
                self.count += 1

        connection.set_trace_callback(trace)


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> Commits:
    """Commits counted on each new ``sqlite3`` connection of this test."""
    counter = Commits()
    connect = sqlite3.connect

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        counter.watch(connection)
        return connection

    monkeypatch.setattr(sqlite3, "connect", counted)
    return counter


@pytest.fixture
def app() -> Iterator[Celery]:
    """An app whose tasks run in this process (no broker is reached)."""
    celery = Celery("prism_celery_commits", broker="memory://", backend="cache+memory://")
    celery.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield celery
    finally:
        celery.close()


def test_a_start_task_commits_a_turn_of_idempotent_tools_once(
    app: Celery, commits: Commits, tmp_path: Path
) -> None:
    """``start`` opens the store URL as one pair on one connection: before the first model
    call, the new file's schema, the session claim and the first checkpoint with the input
    (at most one commit each); then each turn of idempotent tools is one commit (its turn
    checkpoint, with the turn's entries), and so is the answer with the terminal checkpoint.
    Opened one by one, the stores took two connections and 3 commits a turn (30 for the
    task)."""
    marks: list[int] = []
    calls: list[Any] = []

    def resolve_agent(agent_id: str) -> tuple[Any, str]:
        provider = create_mock_provider(
            on_request=lambda request: marks.append(commits.count),
            turns=[
                *(tool_turn((f"c{i}", "ensure", {"step": i})) for i in range(TOOL_TURNS)),
                text_turn("done"),
            ],
        )
        agent = create_agent(
            id=agent_id,
            model={"provider": "mock", "model": "m"},
            provider=provider,
            tools=[echo_tool("ensure", calls, idempotent=True)],
        )
        return agent, "rev-1"

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    tasks = create_run_tasks(app, resolve_agent=resolve_agent, store_url=url)
    done = tasks.start.apply(args=("ensurer", "order-1", "go")).get()
    assert done["status"] == "succeeded"
    assert len(calls) == TOOL_TURNS
    per_turn = [end - start for start, end in zip(marks, [*marks[1:], commits.count], strict=True)]
    assert commits.connections == 1
    # At most one commit each before the first model call; the SQLite group commit may join
    # writes queued together into one (seen on a loaded machine), never split one.
    assert 1 <= marks[0] <= 3
    assert per_turn == [1] * (TOOL_TURNS + 1)
