"""SQLite statement text: a SQLAlchemy statement compiled once to ``sqlite3`` text.

The thread-driven SQLite stores run their statements on a stdlib ``sqlite3`` connection, as
text with ``:name`` parameters. :class:`CompiledStatement` holds one statement's text and its
literal parameters, compiled on first use (or taken from the stored texts of
:mod:`._sqlite_text`); :func:`compile_sqlite` gives one per statement in a process. It must
not run a statement.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect

__all__ = ("CompiledStatement", "compile_sqlite")

_DIALECT = sqlite_dialect.dialect(paramstyle="named")


class CompiledStatement:
    """A SQLAlchemy statement compiled to SQLite text with ``:name`` parameters, once, on
    first use: a store builds all its statements when it is made, and a short-lived process
    (a cold resume) uses only a few of them."""

    __slots__ = ("_defaults", "_statement", "_text")

    def __init__(self, statement: sa.Executable | None) -> None:
        self._statement = statement
        self._text: str | None = None
        self._defaults: dict[str, Any] = {}

    @classmethod
    def from_text(cls, text: str, defaults: Mapping[str, Any]) -> CompiledStatement:
        """A statement already compiled: its text and literal parameters (see
        :mod:`prism_store_sql._sqlite_text`)."""
        compiled = cls(None)
        compiled._defaults = dict(defaults)
        compiled._text = text
        return compiled

    @property
    def text(self) -> str:
        """The statement's SQLite text."""
        text = self._text
        if text is None:
            assert self._statement is not None
            compiled = self._statement.compile(  # type: ignore[attr-defined]
                dialect=_DIALECT, compile_kwargs={"render_postcompile": True}
            )
            # Literal values in the statement (e.g. a CTE's depth 0) are parameters too.
            self._defaults = {
                name: value for name, value in compiled.params.items() if value is not None
            }
            # Set last: a thread that sees the text sees the defaults too (two threads
            # compiling at once both compute the same values).
            text = self._text = compiled.string
        return text

    @property
    def defaults(self) -> dict[str, Any]:
        """The statement's literal parameters, by name."""
        if self._text is None:
            self.text  # noqa: B018 - compiles
        return self._defaults

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` plus the statement's literal parameters."""
        defaults = self.defaults
        return {**defaults, **values} if defaults else dict(values)


@functools.lru_cache(maxsize=1024)
def compile_sqlite(statement: sa.Executable) -> CompiledStatement:
    """``statement`` as SQLite text (see :class:`CompiledStatement`): one per statement in a
    process, so stores sharing a statement (one prefix's, see
    :func:`~prism_store_sql._schema.build_tables`) compile it once."""
    return CompiledStatement(statement)
