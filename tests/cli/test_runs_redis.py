"""``prism runs`` on a Redis store: the listing walks the status sets; approve runs the run."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from prism_cli import main
from tests.cli.runs_support import install_host, refunds, seed, stored
from tests.conftest import REDIS_URL, service_unavailable


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A store URL under a private prefix whose keys are deleted afterwards."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        client.close()
        service_unavailable("Redis", f"{REDIS_URL}: {exc}")
    prefix = f"prismtest:{uuid.uuid4().hex}"
    yield f"{REDIS_URL}?prefix={prefix}"
    keys = list(client.scan_iter(match=f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Any]:
    """The host module, imported from ``tmp_path``."""
    module = install_host(tmp_path)
    yield module
    sys.modules.pop(module.__name__, None)


def test_runs_list_and_approve_on_redis(
    capsys: pytest.CaptureFixture[str], host: Any, redis_url: str
) -> None:
    """A status filter lists only that status; approve finishes the run exactly once."""
    suspended = seed(redis_url, host, "s-1", how="suspended")
    crashed = seed(redis_url, host, "s-2", how="crashed")
    assert main(["runs", "list", "--store", redis_url, "--status", "suspended", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == [suspended]
    assert main(["runs", "list", "--store", redis_url, "--recoverable", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == [crashed]
    app = f"{host.__name__}:resolve_agent"
    here = ("--store", redis_url, "--app", app, "--all", "--here")
    assert main(["runs", "approve", suspended, *here]) == 0
    assert capsys.readouterr().out.startswith(f"run {suspended}: succeeded")
    assert stored(redis_url, suspended)[1] == "succeeded"  # type: ignore[index]
    # The crashed run's first turn refunded both orders; approving the other refunded them once.
    assert refunds(host) == ["A-1", "B-2", "A-1", "B-2"]
    assert main(["runs", "list", "--store", redis_url, "--status", "suspended"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
