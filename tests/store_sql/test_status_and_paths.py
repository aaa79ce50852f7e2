"""``status`` writes nothing; a migration into a missing directory names the path and a code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prism_store_sql import (
    SqlStoreMigrationError,
    SqlStoreSchemaError,
    migrate,
    read_schema_version,
)
from prism_store_sql.__main__ import EXIT_MIGRATION_DUE, EXIT_NO_DATABASE


def _module(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism_store_sql", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_status_of_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    """``status sqlite:///new.db`` reports "no database", exits 3 and leaves the folder empty."""
    done = _module("status", "sqlite:///new.db", cwd=tmp_path)
    assert done.returncode == EXIT_NO_DATABASE == 3, done.stderr
    assert "no database at new.db" in done.stdout
    assert "python -m prism_store_sql migrate sqlite:///new.db" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_status_of_an_empty_database_says_a_migration_is_due(tmp_path: Path) -> None:
    """An existing file without tables exits 2 with schema version 0 and gains no tables."""
    import sqlite3

    sqlite3.connect(tmp_path / "empty.db").close()
    done = _module("status", "sqlite:///empty.db", cwd=tmp_path)
    assert done.returncode == EXIT_MIGRATION_DUE == 2, done.stderr
    assert "schema version 0" in done.stdout
    with sqlite3.connect(tmp_path / "empty.db") as connection:
        tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == []


@pytest.mark.anyio
async def test_read_schema_version_does_not_create_the_file(tmp_path: Path) -> None:
    """The library call behind ``status`` reads a missing file as version 0 and creates nothing."""
    target = tmp_path / "absent.db"
    assert await read_schema_version(f"sqlite:///{target}") == 0
    assert not target.exists()


@pytest.mark.anyio
async def test_migrate_into_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    """``migrate`` refuses with ``ERR_PRISM_MIGRATION``, naming the file and its directory."""
    target = tmp_path / "no" / "such" / "dir" / "run.db"
    with pytest.raises(SqlStoreMigrationError) as info:
        await migrate(f"sqlite:///{target}")
    assert info.value.code == "ERR_PRISM_MIGRATION"
    assert isinstance(info.value, SqlStoreSchemaError)
    assert str(target) in str(info.value)
    assert f"mkdir -p {target.parent}" in str(info.value)
    assert not (tmp_path / "no").exists()


def test_migrate_command_into_a_missing_directory_exits_1_with_the_code(tmp_path: Path) -> None:
    """The command line prints the code and the path, not a traceback."""
    done = _module("migrate", "sqlite:///nowhere/run.db", cwd=tmp_path)
    assert done.returncode == 1
    assert "error [ERR_PRISM_MIGRATION]" in done.stderr
    assert "'nowhere/run.db'" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
