"""``bench/server_load.py`` at a small size: every run decided once, every refund ran once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "server_load.py"


def test_the_load_bench_decides_every_run_once(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("server_load_bench", BENCH)
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--runs", "12", "--clients", "4", "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert "every run decided exactly once (one 200, one 409): True" in out
    assert "every refund ran exactly once: True" in out
    assert "p99" in out
