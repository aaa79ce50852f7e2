"""Work marks: which runs wait for a worker, whoever owns them.

A run whose decisions were recorded but not run (``decide_agent_run``), or one a face started
for a caller, may belong to any owner, and a worker must find it without listing every
tenant. So the recorder leaves a mark in the unowned namespace ``prism.run-work`` naming the
run and the ownership to claim it under; a worker lists the marks and continues each run.

A mark is a hint, the run's checkpoint the truth. Each mark is keyed by the run and the
checkpoint version it was written for (``"<run id>@<version>"``) and written after that
checkpoint, so nobody ever writes a mark's key twice: a worker deletes a mark once its run is
no longer ``running`` (it stopped: suspended or ended) or is gone, and a later decision
leaves a mark of its own under a new key. A recoverable run without a mark is still continued
by an explicit ``continue`` (and workers continue unowned runs whose lease expired).

A worker that cannot continue a marked run (a call in doubt, an agent it no longer serves, a
restore hook that fails) leaves the run as it is and notes why on the mark (a new version of
the same key, a :class:`WorkRefusal`), so whoever waits for the run (the server's resume,
``--wait``) can answer with that refusal instead of waiting for a stop that will not come.

It writes and reads marks only; it must not decide when a run needs one (``resume/`` and the
workers do).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import attrs

from ..errors import CheckpointConflictError
from ._checkpoints import CheckpointRecord, CheckpointStore, normalise_ownership

__all__ = (
    "WORK_NAMESPACE",
    "WorkMark",
    "WorkRefusal",
    "delete_work_mark",
    "list_work_marks",
    "mark_work",
    "note_refusal",
    "read_refusal",
)

#: The namespace of the marks (unowned records).
WORK_NAMESPACE = "prism.run-work"


@attrs.frozen(kw_only=True)
class WorkMark:
    """A run waiting for a worker: its id, the ownership to claim it under, and the mark's
    key (the run id and the checkpoint version it was written for)."""

    key: str
    run_id: str
    ownership: Mapping[str, str] | None
    version: int


def _mark(record: CheckpointRecord) -> WorkMark | None:
    value = record.value
    if not isinstance(value, dict):
        return None
    run_id, version, ownership = value.get("run_id"), value.get("version"), value.get("ownership")
    if not isinstance(run_id, str) or type(version) is not int:
        return None
    if ownership is not None and not (
        isinstance(ownership, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in ownership.items())
    ):
        return None
    return WorkMark(key=record.key, run_id=run_id, ownership=ownership or None, version=version)


async def mark_work(
    checkpoints: CheckpointStore, run_id: str, version: int, ownership: Mapping[str, str] | None
) -> None:
    """Mark ``run_id`` (owned by ``ownership``) as waiting for a worker from its checkpoint
    ``version`` on; call it after that checkpoint is written. Marking twice is harmless."""
    value = {
        "run_id": run_id,
        "version": version,
        "ownership": normalise_ownership(ownership),
        "marked_at": time.time(),
    }
    try:
        await checkpoints.save(
            WORK_NAMESPACE, f"{run_id}@{version}", value, version=1, expected_version=0
        )
    except CheckpointConflictError:
        # The mark is there already.
        return


async def list_work_marks(
    checkpoints: CheckpointStore, *, limit: int = 100, cursor: str | None = None
) -> tuple[list[WorkMark], str | None]:
    """One page of marks (records that are not marks are skipped) and the next cursor."""
    page = await checkpoints.list(WORK_NAMESPACE, limit=limit, cursor=cursor)
    marks = (_mark(record) for record in page.records)
    return [mark for mark in marks if mark is not None], page.cursor


async def delete_work_mark(checkpoints: CheckpointStore, mark: WorkMark) -> bool:
    """Delete a mark whose run no longer needs a worker (nobody writes its key again)."""
    return await checkpoints.delete(WORK_NAMESPACE, mark.key)


@attrs.frozen(kw_only=True)
class WorkRefusal:
    """Why a worker left a marked run as it is: the refusal's ``code`` and ``message``."""

    code: str
    message: str


async def note_refusal(
    checkpoints: CheckpointStore, mark: WorkMark, code: str, message: str
) -> None:
    """Note on ``mark`` that a worker left its run as it is (``code``, ``message``); a mark
    that is gone or was noted already is left alone."""
    record = await checkpoints.load(WORK_NAMESPACE, mark.key)
    if record is None or not isinstance(record.value, dict):
        return
    value = {**record.value, "refused": {"code": code, "message": message}}
    try:
        await checkpoints.save(
            WORK_NAMESPACE,
            mark.key,
            value,
            version=record.version + 1,
            expected_version=record.version,
        )
    except CheckpointConflictError:
        # Another worker noted it first.
        return


async def read_refusal(
    checkpoints: CheckpointStore, run_id: str, version: int
) -> WorkRefusal | None:
    """What a worker noted when it left ``run_id`` as it is at checkpoint ``version``, if
    it did."""
    record = await checkpoints.load(WORK_NAMESPACE, f"{run_id}@{version}")
    noted = (
        record.value.get("refused")
        if record is not None and isinstance(record.value, dict)
        else None
    )
    if not isinstance(noted, dict):
        return None
    code, message = noted.get("code"), noted.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    return WorkRefusal(code=code, message=message)
