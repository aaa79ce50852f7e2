"""Servers and clients for the A2A tests: ``tests.a2a.app`` under uvicorn in a child process on
loopback, and the official ``a2a-sdk`` client talking to it (A2A 1.0, or 0.3's method names).

A server process is stopped by its pid: ``stop()`` sends SIGTERM (uvicorn shuts down and the
stores close), ``kill()`` sends SIGKILL (nothing shuts down). Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, new_data_part, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

ROOT = Path(__file__).resolve().parents[2]
#: The served agent's instructions: the model's, never the callers' (no card carries them).
INSTRUCTIONS = "Internal billing policy: refunds over 100 go to the approvals queue."
#: What the served agent's card says it does.
DESCRIPTION = "Refunds and order lookups; a person approves refunds over 100."
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


class Server:
    """``tests.a2a.app:app`` under uvicorn in a child process, on a loopback port of its own.

    ``db`` and ``effects`` are the SQLite file and the tool-effects file; ``env`` adds
    settings (``PRISM_A2A_TEST_AUTH``, ``PRISM_A2A_TEST_CARD``).
    """

    def __init__(self, db: Path, effects: Path, **env: str) -> None:
        self.db = db
        self.effects = effects
        #: The effect log the ``slow`` tool applies to (``tests.effect_log.EffectLog``).
        self.effect_log = db.parent / "effect-log"
        #: Where the test releases a ``slow`` call (a file named after its order).
        self.release = db.parent
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        child_env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PRISM_A2A_TEST_DB": str(db),
            "PRISM_A2A_TEST_EFFECTS": str(effects),
            "PRISM_A2A_TEST_EFFECT_LOG": str(db.parent / "effect-log"),
            "PRISM_A2A_TEST_RELEASE": str(db.parent),
            "PRISM_A2A_TEST_URL": f"{self.base}/",
            **env,
        }
        command = [sys.executable, "-m", "uvicorn", "tests.a2a.app:app"]
        command += ["--fd", str(sock.fileno()), "--log-level", "warning"]
        self.process = subprocess.Popen(
            command, env=child_env, pass_fds=[sock.fileno()], cwd=db.parent
        )
        sock.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the A2A test server exited with {self.process.returncode}")
            try:
                if httpx.get(self.base + AGENT_CARD_WELL_KNOWN_PATH, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("the A2A test server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM by pid and wait for the process (SIGKILL if it does not end in time)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise

    def kill(self) -> None:
        """SIGKILL by pid and reap the process."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_S)


def order() -> str:
    """An order id of the calling test's own (a module's tests share one server)."""
    return f"A-{uuid.uuid4().hex[:10]}"


def effects(path: Path) -> list[str]:
    """The tool calls that really ran, in order (``"refund A-1"``, ...)."""
    if not path.exists():
        return []
    return path.read_text(encoding="utf-8").splitlines()


@asynccontextmanager
async def a2a_client(
    base: str,
    *,
    protocol: str = "1.0",
    streaming: bool = True,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """The official client for the agent at ``base``, speaking A2A ``protocol`` (``"1.0"``,
    or ``"0.3"``: ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``)."""
    async with httpx.AsyncClient(timeout=30, headers=headers or {}) as http:
        factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
        card = await A2ACardResolver(http, base).get_agent_card()
        chosen = [i for i in card.supported_interfaces if i.protocol_version == protocol]
        assert len(chosen) == 1, card.supported_interfaces
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(chosen)
        client = factory.create(card)
        try:
            yield client
        finally:
            await client.close()


def text_message(text: str, *, context_id: str | None = None) -> Message:
    """A user message with one text part (optionally continuing ``context_id``)."""
    message = Message(
        role=Role.ROLE_USER, message_id=os.urandom(8).hex(), parts=[new_text_part(text)]
    )
    if context_id is not None:
        message.context_id = context_id
    return message


def data_message(task_id: str, data: Any) -> Message:
    """A user message on ``task_id`` with one data part."""
    return Message(
        role=Role.ROLE_USER,
        message_id=os.urandom(8).hex(),
        task_id=task_id,
        parts=[new_data_part(data)],
    )


def decisions(task_id: str, entries: Sequence[dict[str, Any]]) -> Message:
    """A message deciding ``entries`` on ``task_id``."""
    return data_message(task_id, {"decisions": list(entries)})


async def send(client: Client, message: Message) -> list[StreamResponse]:
    """Every response the client yields for ``message``."""
    return [response async for response in client.send_message(SendMessageRequest(message=message))]


def task_id_of(responses: Sequence[StreamResponse]) -> str:
    """The task the responses are about."""
    first = responses[0]
    if first.HasField("task"):
        return first.task.id
    return first.status_update.task_id


def states(responses: Sequence[StreamResponse]) -> list[str]:
    """The task state each response reports (``"task:..."`` for a whole task, ``"artifact"``)."""
    out = []
    for response in responses:
        if response.HasField("task"):
            out.append("task:" + TaskState.Name(response.task.status.state))
        elif response.HasField("status_update"):
            out.append(TaskState.Name(response.status_update.status.state))
        elif response.HasField("artifact_update"):
            out.append("artifact")
        else:
            out.append("message")
    return out


def data_of(message: Message) -> list[Any]:
    """The data parts of ``message``."""
    return list(get_data_parts(message.parts))


def pending_of(task: Task) -> list[dict[str, Any]]:
    """The pending decisions a waiting task's status message carries."""
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
    [part] = [d for d in data_of(task.status.message) if "pending_decisions" in d]
    return list(part["pending_decisions"])


def answer_of(task: Task) -> str:
    """The text of a completed task's answer artifact."""
    [artifact] = [a for a in task.artifacts if a.artifact_id == "answer"]
    return "".join(part.text for part in artifact.parts)


async def get_task(client: Client, task_id: str) -> Task:
    """``tasks/get``."""
    return await client.get_task(GetTaskRequest(id=task_id))


async def cancel_task(client: Client, task_id: str) -> Task:
    """``tasks/cancel``."""
    return await client.cancel_task(CancelTaskRequest(id=task_id))
