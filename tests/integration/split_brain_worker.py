"""One worker of the split-brain test: starts or continues one durable run whose tool's effect
is fenced.

Run as ``python split_brain_worker.py '<json args>'``. The run's one tool, ``pay``, writes a
marker file when it starts (so the test can freeze this process with SIGSTOP right there),
sleeps ``work`` seconds, then applies its effect through the host's :class:`Ledger` with the
run's fencing token from its context. Its ``reconcile`` first fences the ledger with the
claim's token, then looks the call up: the pattern ``docs/durable-runs.md`` describes. The
worker prints one JSON line when it ends: the run's status, or the error code that ended it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import anyio

import prism_store_sql
from prism_core import (
    AGENT_RUN_NAMESPACE,
    RECONCILE_NOT_STARTED,
    AgentRunError,
    PrismError,
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
    open_stores,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)

REVISION = "split-brain-1"


class StaleFence(Exception):
    """The ledger has seen a higher fencing token for this run: the write is a late one."""


class Ledger:
    """The host's effect store: it applies a payment once per idempotency key and refuses any
    write whose fencing token is below the highest it has seen for the run (SQLite file or
    PostgreSQL tables ``<prefix>fences``, ``<prefix>effects``, ``<prefix>refused``)."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.prefix = prefix

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        if self.url.startswith("sqlite:///"):
            connection = sqlite3.connect(self.url.removeprefix("sqlite:///"), timeout=30)
            with closing(connection):
                connection.execute("BEGIN IMMEDIATE")
                try:
                    yield connection
                except BaseException:
                    connection.rollback()
                    raise
                connection.commit()
        else:
            import psycopg

            with psycopg.connect(self.url) as connection:
                # One fence row per run, locked for the transaction: writers serialise on it.
                yield connection

    def _sql(self, text: str) -> str:
        text = text.replace("T_", self.prefix)
        return text if self.url.startswith("sqlite:///") else text.replace("?", "%s")

    def create(self) -> None:
        """Create the ledger's tables."""
        with self._transaction() as db:
            db.execute(self._sql("CREATE TABLE T_fences (run_id TEXT PRIMARY KEY, token INTEGER)"))
            db.execute(
                self._sql(
                    "CREATE TABLE T_effects (key TEXT PRIMARY KEY, token INTEGER, pid INTEGER)"
                )
            )
            db.execute(self._sql("CREATE TABLE T_refused (key TEXT, token INTEGER, pid INTEGER)"))

    def _fence(self, db: Any, run_id: str, token: int) -> int:
        """Raise the run's fence to ``token``; the fence as it was before."""
        db.execute(
            self._sql("INSERT INTO T_fences VALUES (?, 0) ON CONFLICT (run_id) DO NOTHING"),
            (run_id,),
        )
        lock = "" if self.url.startswith("sqlite:///") else " FOR UPDATE"
        (seen,) = db.execute(
            self._sql(f"SELECT token FROM T_fences WHERE run_id = ?{lock}"), (run_id,)
        ).fetchone()
        if token > seen:
            db.execute(self._sql("UPDATE T_fences SET token = ? WHERE run_id = ?"), (token, run_id))
        return int(seen)

    def pay(self, run_id: str, key: str, token: int) -> None:
        """Apply the payment ``key`` under ``token``; :class:`StaleFence` for a late writer."""
        with self._transaction() as db:
            seen = self._fence(db, run_id, token)
            if token < seen:
                db.execute(
                    self._sql("INSERT INTO T_refused VALUES (?, ?, ?)"), (key, token, os.getpid())
                )
            else:
                db.execute(
                    self._sql("INSERT INTO T_effects VALUES (?, ?, ?)"), (key, token, os.getpid())
                )
        if token < seen:
            raise StaleFence(f"fencing token {token} is below {seen} for run {run_id}")

    def fenced_lookup(self, run_id: str, key: str, token: int) -> bool:
        """Fence the run at ``token`` first, then say whether payment ``key`` was applied."""
        with self._transaction() as db:
            self._fence(db, run_id, token)
            row = db.execute(self._sql("SELECT 1 FROM T_effects WHERE key = ?"), (key,)).fetchone()
        return row is not None

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of ``effects`` or ``refused``."""
        with self._transaction() as db:
            return [tuple(r) for r in db.execute(self._sql(f"SELECT * FROM T_{table}")).fetchall()]

    def drop(self) -> None:
        """Drop the ledger's tables."""
        with self._transaction() as db:
            for table in ("fences", "effects", "refused"):
                db.execute(self._sql(f"DROP TABLE IF EXISTS T_{table}"))


def build_agent(ledger: Ledger, markers: Path, work: float, sessions: Any) -> Any:
    """One tool turn (``pay``), then the answer."""

    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            if not any(m.role == "assistant" for m in request.messages):
                yield provider_tool_call(tool_call_content("p1", "pay", {"amount": 900}))
            else:
                yield provider_text_delta("paid")
            yield provider_done()

    def pay(args: dict[str, Any], context: Any) -> Any:
        (markers / f"entered-{os.getpid()}").write_text(str(context.fencing_token))
        time.sleep(work)  # SIGSTOP lands here: started, effect not yet applied
        ledger.pay(context.run_id, context.idempotency_key, context.fencing_token)
        return {"paid": args["amount"]}

    def reconcile(call: Any, context: Any) -> Any:
        if ledger.fenced_lookup(context.run_id, context.idempotency_key, context.fencing_token):
            return {"paid": call.arguments["amount"]}
        return RECONCILE_NOT_STARTED

    return create_agent(
        id="fenced",
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[ToolDefinition("pay", pay, reconcile=reconcile)],
        store=sessions,
    )


def say(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(args: dict[str, Any]) -> int:
    ledger = Ledger(args["ledger"], args["ledger_prefix"])
    async with open_stores(args["store"], plugins=[prism_store_sql.plugin]) as (
        checkpoints,
        sessions,
    ):
        agent = build_agent(ledger, Path(args["markers"]), args["work"], sessions)
        try:
            if args["mode"] == "start":
                result = await agent.create_session(id=args["session"]).run(
                    "pay the invoice",
                    run_state=RunStateOptions(
                        checkpoints, REVISION, checkpoint_policy="every-turn", lease_ms=1000
                    ),
                )
                say({"status": result.status})
                return 0
            page = await checkpoints.list(AGENT_RUN_NAMESPACE)
            (record,) = [r for r in page.records if r.value["session_id"] == args["session"]]
            ref = {"run_id": record.key, "session_id": args["session"]}
            deadline = time.monotonic() + 60
            while True:
                status = await load_agent_run_state(checkpoints, ref)
                assert status is not None
                try:
                    result = await resume_agent_run(
                        agent,
                        ref,
                        {"expected_version": status.version, "decision": "continue"},
                        checkpoints=checkpoints,
                        definition_revision=REVISION,
                    )
                    break
                except PrismError as exc:
                    # The frozen worker's lease has not lapsed yet: wait as a sweeper would.
                    if exc.code != "ERR_PRISM_RUN_LEASED" or time.monotonic() > deadline:
                        raise
                    await anyio.sleep(0.2)
            say(
                {
                    "status": result.status,
                    "fencing_token": (
                        await checkpoints.load(AGENT_RUN_NAMESPACE, record.key)
                    ).fencing_token,
                }
            )
            return 0
        except AgentRunError as exc:
            say({"status": exc.result.status, "code": exc.code})
            return 1


if __name__ == "__main__":
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
