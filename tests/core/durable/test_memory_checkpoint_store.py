"""The memory checkpoint store: the conformance suite plus its own limits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from prism_core.errors import CheckpointConflictError
from prism_core.records import SessionStore, create_memory_session_store
from prism_core.stores import (
    CheckpointLimitError,
    CheckpointStore,
    MemoryCheckpointStore,
    create_memory_checkpoint_store,
)
from prism_core.testing import (
    CheckpointBatchConformance,
    CheckpointStoreConformance,
    SharedCommitConformance,
)


class TestMemoryCheckpointStore(CheckpointStoreConformance):
    """The memory store passes the checkpoint store conformance suite."""

    @pytest.fixture
    async def checkpoint_store(self) -> AsyncIterator[CheckpointStore]:
        """A fresh memory store, closed after the test."""
        async with create_memory_checkpoint_store() as store:
            yield store

    @pytest.fixture
    def checkpoint_store_factory(
        self, checkpoint_store: CheckpointStore
    ) -> Callable[[], CheckpointStore]:
        """The same instance: two memory stores never share records, so there is no other."""
        return lambda: checkpoint_store


class TestMemorySharedCommit(SharedCommitConformance):
    """A memory checkpoint store commits together with a memory session store."""

    @pytest.fixture
    def shared_stores(self) -> tuple[CheckpointStore, SessionStore]:
        """A fresh pair of memory stores."""
        return create_memory_checkpoint_store(), create_memory_session_store()


class TestMemoryCheckpointBatch(CheckpointBatchConformance):
    """A memory checkpoint store commits several of its saves together."""

    @pytest.fixture
    def checkpoint_store(self) -> CheckpointStore:
        """A fresh memory store."""
        return create_memory_checkpoint_store()


def test_memory_store_satisfies_the_protocol() -> None:
    """The memory store is a ``CheckpointStore``."""
    store = create_memory_checkpoint_store()
    assert isinstance(store, MemoryCheckpointStore)
    assert isinstance(store, CheckpointStore)


@pytest.mark.anyio
async def test_max_records_refuses_new_keys_but_not_updates() -> None:
    """At ``max_records`` a new key raises ``CheckpointLimitError``; existing keys still save."""
    store = create_memory_checkpoint_store(max_records=2)
    await store.save("ns", "a", 1, version=1)
    await store.save("ns", "b", 1, version=1)
    with pytest.raises(CheckpointLimitError) as info:
        await store.save("ns", "c", 1, version=1)
    assert info.value.code == "ERR_PRISM_CHECKPOINT_LIMIT"
    assert "2" in str(info.value)
    assert await store.load("ns", "c") is None
    updated = await store.save("ns", "a", 2, version=2, expected_version=1)
    assert updated.value == 2
    assert await store.delete("ns", "b") is True
    assert (await store.save("ns", "c", 1, version=1)).key == "c"


@pytest.mark.anyio
async def test_max_records_reports_conflicts_first() -> None:
    """A full store still answers a CAS miss on a new key with a conflict."""
    store = create_memory_checkpoint_store(max_records=1)
    await store.save("ns", "a", 1, version=1)
    with pytest.raises(CheckpointConflictError):
        await store.save("ns", "b", 1, version=2, expected_version=1)


@pytest.mark.anyio
async def test_max_value_bytes_measures_canonical_json() -> None:
    """A value over ``max_value_bytes`` (canonical JSON) is refused and not written."""
    store = create_memory_checkpoint_store(max_value_bytes=12)
    # Canonical JSON has no spaces: {"a":"12345"} is 13 bytes, {"a":"1234"} exactly 12.
    with pytest.raises(CheckpointLimitError):
        await store.save("ns", "k", {"a": "12345"}, version=1)
    assert await store.load("ns", "k") is None
    fits = await store.save("ns", "k", {"a": "1234"}, version=1)
    assert fits.value == {"a": "1234"}
    with pytest.raises(CheckpointLimitError):
        # Eight characters, but fourteen UTF-8 bytes.
        await store.save("ns", "k", "ü" * 6, version=2)
    record = await store.load("ns", "k")
    assert record is not None
    assert record.version == 1


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_limits_must_be_positive_integers(bad: object) -> None:
    """Non-positive or non-integer limits are refused when the store is created."""
    with pytest.raises(ValueError, match="max_records"):
        create_memory_checkpoint_store(max_records=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_value_bytes"):
        create_memory_checkpoint_store(max_value_bytes=bad)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_stores_are_independent() -> None:
    """Two memory stores never share records."""
    first, second = create_memory_checkpoint_store(), create_memory_checkpoint_store()
    await first.save("ns", "k", 1, version=1)
    assert await second.load("ns", "k") is None


def test_conformance_kit_loads_as_a_pytest_plugin(tmp_path: Path) -> None:
    """A project enabling ``prism_core.testing`` via ``pytest_plugins`` runs the suite."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings = error\naddopts = --strict-markers -p no:cacheprovider\n"
    )
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["prism_core.testing"]\n')
    (tmp_path / "test_kit.py").write_text(
        textwrap.dedent(
            """
            import pytest

            from prism_core.stores import create_memory_checkpoint_store
            from prism_core.testing import CheckpointStoreConformance


            class TestKit(CheckpointStoreConformance):
                @pytest.fixture
                async def checkpoint_store(self):
                    async with create_memory_checkpoint_store() as store:
                        yield store

                @pytest.fixture
                def checkpoint_store_factory(self, checkpoint_store):
                    return lambda: checkpoint_store
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
    assert "CheckpointStoreConformance" not in done.stdout


def test_prism_core_does_not_import_pytest() -> None:
    """Importing ``prism_core`` and its stores leaves pytest unimported."""
    code = (
        "import sys, prism_core, prism_core.stores, prism_core.durable;"
        "assert 'pytest' not in sys.modules, 'pytest imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_validate_save_takes_the_callers_encoding_of_the_value() -> None:
    """``encoded=`` is the value's canonical JSON as the caller made it: the request carries
    those bytes (no second encoding) and their length; without it the value is encoded."""
    from prism_core.codec import dumps
    from prism_core.stores import InvalidCheckpointError, validate_save

    value = {"status": "running", "n": 1}
    marked = b'{"n":1,"status":"running","x":0}'
    request = validate_save("ns", "k", value, version=1, encoded=marked)
    assert (request.value_json, request.value_bytes) == (marked.decode(), len(marked))
    assert request.status == "running"
    plain = validate_save("ns", "k", value, version=1)
    assert plain.value_json == dumps(value).decode()
    with pytest.raises(InvalidCheckpointError):
        validate_save("ns", "k", value, version=1, encoded=marked.decode())  # type: ignore[arg-type]
