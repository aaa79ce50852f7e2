"""``prism serve`` opens its one ``--store`` URL as a pair of stores that commit together."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio
import pytest

import prism_server._app as server_app
from prism_core import StorePair
from prism_core.stores import shared_transaction
from prism_server._serve import serve


@pytest.mark.parametrize("scheme", ["sqlite", "memory"])
def test_prism_serve_opens_its_store_url_as_one_pair(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app gets the pair (a checkpoint store and a session store that can commit
    together: one ``sqlite3`` connection for a SQLite URL), and both are closed together on
    shutdown."""
    import uvicorn

    made: dict[str, Any] = {}
    create_app = server_app.create_app

    def recording(stores: Any, **options: Any) -> Any:
        made.update(options, stores=stores)
        return create_app(stores, **options)

    monkeypatch.setattr(server_app, "create_app", recording)
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: made.setdefault("app", app))
    monkeypatch.delenv("PRISM_SERVER_TOKEN", raising=False)
    url = f"sqlite:///{tmp_path / 'served.db'}" if scheme == "sqlite" else "memory://"
    args = argparse.Namespace(store=url, host="127.0.0.1", port=0)
    assert serve(args, lambda agent_id: None) == 0
    assert isinstance(made["stores"], StorePair)
    checkpoints, sessions = made["stores"]

    async def shutdown() -> None:
        assert shared_transaction(checkpoints, sessions) is not None
        if scheme == "sqlite":
            assert checkpoints.database is sessions.database
        async with made["app"].router.lifespan_context(made["app"]):
            pass

    anyio.run(shutdown)
    if scheme == "sqlite":
        assert checkpoints.closed
        assert sessions.closed
