"""The stored SQLite text of the hot statements is exactly what SQLAlchemy compiles, and a
store opened in a fresh process builds no SQLAlchemy table or statement on its hot path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prism_store_sql._sqlite import CompiledStatement
from prism_store_sql._sqlite_text import (
    PLACEHOLDER,
    generate,
    statement_builders,
    stored_statement,
)
from prism_store_sql._sqlite_texts import TEXTS


def test_the_stored_texts_are_the_compiled_statements() -> None:
    """Regenerate with ``python -m prism_store_sql._sqlite_text`` when this fails."""
    assert generate() == TEXTS
    assert set(TEXTS) == set(statement_builders(PLACEHOLDER))


def test_a_stored_text_with_a_prefix_is_that_prefix_compiled() -> None:
    for name, build in statement_builders("other_").items():
        compiled = CompiledStatement(build())
        stored = stored_statement("other_", name)
        assert stored.text == compiled.text, name
        assert stored.defaults == compiled.defaults, name
        assert PLACEHOLDER not in stored.text


def test_a_continue_in_a_fresh_process_builds_no_tables(tmp_path: Path) -> None:
    """Opening the SQLite stores and using their hot statements (save, load, append, the
    branch and run-tail read) builds no SQLAlchemy table and compiles nothing."""
    script = f"""
import anyio
from prism_store_sql import _schema, _sqlite, open_sql_stores
from prism_core.records import create_session_entry

built = []
real = _schema._tables_for
_schema._tables_for = lambda prefix: built.append(prefix) or real(prefix)
compiled = []
real_compile = _sqlite.CompiledStatement.text.fget
def text(self):
    if self._text is None:
        compiled.append(self._statement)
    return real_compile(self)
_sqlite.CompiledStatement.text = property(text)

async def main():
    url = "sqlite:///{tmp_path / "fresh.db"}"
    # The schema is created in another process first: creating it is no hot path.
    async with open_sql_stores(url) as stores:
        checkpoints, sessions = stores
        await checkpoints.save("ns", "k", {{"v": 1}}, version=1)
        entry = create_session_entry(session_id="s", kind="label", label="x")
        await sessions.append(entry)
        record, prefetched = await checkpoints.load_with_run_branch(
            "ns", "k", sessions=sessions
        )
        assert record is not None
        await sessions.read_branch_and_run_tail("s", entry.id, "r")
        assert await sessions.get(entry.id) == entry
    print(len(built), len(compiled))

anyio.run(main)
"""
    create = (
        "import anyio\nfrom prism_store_sql import migrate\n"
        f"anyio.run(migrate, 'sqlite:///{tmp_path / 'fresh.db'}')"
    )
    subprocess.run([sys.executable, "-c", create], check=True)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"]
