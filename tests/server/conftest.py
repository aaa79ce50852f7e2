"""Databases for the server tests: a SQLite file, or an isolated PostgreSQL table prefix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL, service_unavailable
from tests.store_sql.conftest import _drop_prefix, _ping, run_in_fresh_loop

from ._support import Database


@pytest.fixture(scope="session")
def server_postgres_prefix() -> Iterator[str]:
    """This session's PostgreSQL table prefix; the tables are dropped at the end."""
    try:
        run_in_fresh_loop(lambda: _ping(POSTGRES_URL))
    except Exception as exc:
        service_unavailable("PostgreSQL", f"{POSTGRES_URL}: {type(exc).__name__}: {exc}")
    prefix = f"prism_srv{uuid.uuid4().hex[:8]}_"
    yield prefix
    run_in_fresh_loop(lambda: _drop_prefix(POSTGRES_URL, prefix))


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """Each test's own database: a SQLite file, or a fresh prefix on the PostgreSQL server."""
    if request.param == "sqlite":
        return Database(f"sqlite:///{tmp_path / 'prism.db'}", "prism_")
    prefix = request.getfixturevalue("server_postgres_prefix")
    return Database(POSTGRES_URL, f"{prefix}{uuid.uuid4().hex[:6]}_")


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Database:
    """A SQLite file of this test's own."""
    return Database(f"sqlite:///{tmp_path / 'prism.db'}", "prism_")
