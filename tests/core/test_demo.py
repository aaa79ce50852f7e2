"""The ``prism demo`` console script."""

from __future__ import annotations

import pytest

from prism_core._cli import main


def test_demo_streams_the_investigation_readably(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo runs both tools, prints each step, and ends with a succeeded run."""
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "search_logs({'service': 'checkout'})" in out
    assert "read_file({'path': 'config/payments.yaml'})" in out
    assert "progress" in out
    assert "Root cause: the payments client times out at 2000 ms" in out
    assert out.rstrip().endswith("status succeeded.")
    assert "\033[" not in out


def test_cli_requires_a_command() -> None:
    """Running prism without a command exits with a usage error."""
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
