"""The console's Effects page and a run's calls and sub-agent runs, in headless Chromium.

Each test writes a screenshot of every page it visits under its tmp dir (``screenshots/``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism_server import create_app
from tests.cli import ledger_host

from ._browser import chromium, phone, shot
from ._support import Database, run_async, running, stored


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for this module's tests."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A phone-sized page of its own."""
    with phone(browser) as tab:
        yield tab


@pytest.fixture
def bank(tmp_path: Path, sqlite_database: Database) -> Iterator[tuple[str, str]]:
    """The app over one run of ``bank`` approved through the API and run to its end: it
    refunded A-3 and asked its ``researcher`` sub-agent, which looked A-3 up and noted
    something; yields the base URL and the run id."""
    folder = tmp_path / "host"
    folder.mkdir()
    host = ledger_host.install(folder)
    try:
        run_id, version = run_async(
            lambda: ledger_host.seed_async(sqlite_database.url, host, "s-bank")
        )
        checkpoints, sessions = sqlite_database.stores()
        app = create_app(
            checkpoints=checkpoints,
            sessions=sessions,
            resolve_agent=host.resolve_agent,
            title="Acme approvals",
        )
        with running(app, checkpoints, sessions) as base:
            approve = {"expected_version": version, "decision": "approve", "reason": "ok"}
            answer = httpx.post(f"{base}/api/runs/{run_id}/resume", json=approve, timeout=60)
            assert answer.json()["status"] == "succeeded", answer.text
            assert stored(sqlite_database, run_id)[1] == "succeeded"
            yield base, run_id
    finally:
        sys.modules.pop(host.__name__, None)


def rows(page: Any) -> list[str]:
    """The tool call ids of the Effects table's rows, in order."""
    return [
        cell.split()[-1] for cell in page.locator('tbody td[data-label="Tool"]').all_inner_texts()
    ]


def test_the_effects_page_lists_and_filters_the_ledger(
    bank: tuple[str, str], page: Any, tmp_path: Path
) -> None:
    """Every call that was not read-only, oldest first, each linked to its run; the filters
    narrow the list as ``prism effects list``'s do."""
    base, run_id = bank
    page.goto(base + "/")
    page.get_by_role("link", name="Effects").click()
    page.wait_for_load_state()
    assert page.url.endswith("/effects")
    assert sorted(rows(page)) == ["c1", "c2", "k2"]
    refund = page.get_by_role("row").filter(has_text="refund")
    assert "completed" in refund.inner_text()
    assert '"order": "A-3"' in refund.inner_text()
    shot(page, tmp_path, "effects-all")

    page.get_by_label("Tool").fill("refund")
    page.get_by_role("button", name="Show effects").click()
    page.wait_for_load_state()
    assert rows(page) == ["c1"]
    shot(page, tmp_path, "effects-tool")

    page.goto(base + "/effects")
    page.get_by_label("Argument filter 1").fill("order=A-3")
    page.get_by_role("button", name="Show effects").click()
    page.wait_for_load_state()
    assert rows(page) == ["c1"]
    page.get_by_label("Status").select_option("in_doubt")
    page.get_by_role("button", name="Show effects").click()
    page.wait_for_load_state()
    assert page.get_by_text("No effects match.").count() == 1
    shot(page, tmp_path, "effects-none")

    page.goto(base + "/effects?run=" + run_id)
    assert sorted(rows(page)) == ["c1", "c2"]
    page.goto(base + "/effects?tool=note")
    note = page.get_by_role("row").filter(has_text="note")
    assert f"sub-agent of {run_id}" in note.inner_text()
    note.get_by_role("link", name=run_id).click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/runs/{run_id}")


def test_a_run_page_lists_its_calls_and_its_sub_agent_runs(
    bank: tuple[str, str], page: Any, tmp_path: Path
) -> None:
    """A finished run's page shows each call (status, key, arguments, result) and each
    sub-agent run with that run's calls; the child's page names its parent."""
    base, run_id = bank
    page.goto(f"{base}/runs/{run_id}")
    calls = page.locator("section.calls")
    assert calls.get_by_role("heading", name="Calls").count() == 1
    # Matched on the call cell alone: a key or hash elsewhere in a row may contain "c1".
    refund = calls.get_by_role("row").filter(
        has=page.locator('td[data-label="Call"]', has_text="refund c1")
    )
    text = refund.inner_text()
    assert "completed" in text
    assert '"refunded": "A-3"' in text
    assert "idem_" in text
    children = page.locator("section.children")
    assert children.get_by_role("heading", name="Sub-agent runs").count() == 1
    child = children.locator("article.child")
    assert child.count() == 1
    child_calls = child.get_by_role("row").all_inner_texts()
    assert any("lookup" in row and "k1" in row for row in child_calls)
    assert any("note" in row and "k2" in row for row in child_calls)
    # The stored note holds a newline, an escape sequence and a bidi override: shown as text.
    assert "\x1b" not in page.content()
    shot(page, tmp_path, "run-calls-and-children")
    child.get_by_role("link").first.click()
    page.wait_for_load_state()
    facts = page.locator("dl.facts").inner_text()
    assert "Sub-agent of" in facts
    assert run_id in facts
    shot(page, tmp_path, "child-run")
    page.goto(base + "/")
    listed = page.locator("tbody tr td:first-child a").all_inner_texts()
    assert listed == [run_id]
    page.get_by_text("Filter runs").click()
    page.get_by_text("Runs started by other runs too").click()
    page.get_by_role("button", name="Show runs").click()
    page.wait_for_load_state()
    assert len(page.locator("tbody tr td:first-child a").all_inner_texts()) == 2
    shot(page, tmp_path, "runs-with-sub-agents")
