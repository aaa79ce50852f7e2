"""The console's runs list in headless Chromium: every run, filtered by status, agent and
recoverable, in pages."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._browser import chromium, phone, serving, shot
from ._support import Database, Host, make_in_doubt, seed, stored


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
def desk(sqlite_database: Database) -> Iterator[tuple[str, dict[str, str]]]:
    """The app over four runs: ``waiting`` (billing, suspended), ``support`` (the support
    agent, suspended), ``done`` (billing, approved: succeeded) and ``doubt`` (billing, a crash
    left its first call in doubt: running, no worker holds it)."""
    host = Host()
    runs = {
        "waiting": seed(sqlite_database, host, ["A-1"]),
        "support": seed(sqlite_database, host, ["B-2"], agent_id="support"),
        "done": seed(sqlite_database, host, ["C-3"]),
        "doubt": seed(sqlite_database, host, ["D-4", "E-5"]),
    }
    make_in_doubt(sqlite_database, runs["doubt"])
    with serving(sqlite_database, host) as (base, _app):
        version, _status = stored(sqlite_database, runs["done"])
        approve = {"expected_version": version, "decision": "approve"}
        answer = httpx.post(f"{base}/api/runs/{runs['done']}/resume", json=approve, timeout=30)
        assert answer.json()["status"] == "succeeded", answer.text
        yield base, runs


def listed(page: Any) -> list[str]:
    """The run ids of the list's rows, in order."""
    return [str(link) for link in page.locator("tbody tr td:first-child a").all_inner_texts()]


def every_page(page: Any, url: str) -> list[str]:
    """The run ids of every page from ``url`` on, following "Next page"."""
    page.goto(url)
    found = listed(page)
    while page.get_by_role("link", name="Next page").count():
        page.get_by_role("link", name="Next page").click()
        page.wait_for_load_state()
        assert page.get_by_role("link", name="First page").count() == 1
        found += listed(page)
    return found


def test_every_run_is_listed_with_its_status_and_what_it_needs(
    desk: tuple[str, dict[str, str]], page: Any, tmp_path: Path
) -> None:
    base, runs = desk
    page.goto(base + "/")
    assert sorted(listed(page)) == sorted(runs.values())

    def row(name: str) -> str:
        return str(page.get_by_role("row").filter(has_text=runs[name]).inner_text())

    assert "suspended" in row("waiting")
    assert "1 decision(s) waiting" in row("waiting")
    assert "support" in row("support")
    assert "succeeded" in row("done")
    assert "nothing (it ended)" in row("done")
    assert "running" in row("doubt")
    assert "in doubt: c1" in row("doubt")
    shot(page, tmp_path, "list")


def test_the_filters_narrow_the_list(
    desk: tuple[str, dict[str, str]], page: Any, tmp_path: Path
) -> None:
    base, runs = desk
    page.goto(base + "/")
    page.get_by_text("Filter runs").click()
    page.get_by_label("Status").select_option("succeeded")
    page.get_by_role("button", name="Show runs").click()
    page.wait_for_load_state()
    assert "status=succeeded" in page.url
    assert listed(page) == [runs["done"]]

    page.goto(base + "/")
    page.get_by_text("Filter runs").click()
    page.get_by_label("Agent").fill("support")
    page.get_by_role("button", name="Show runs").click()
    page.wait_for_load_state()
    assert listed(page) == [runs["support"]]
    assert page.get_by_label("Agent").input_value() == "support"

    page.goto(base + "/")
    page.get_by_text("Filter runs").click()
    page.get_by_label("Can be continued").select_option("true")
    page.get_by_role("button", name="Show runs").click()
    page.wait_for_load_state()
    assert listed(page) == [runs["doubt"]]
    shot(page, tmp_path, "recoverable")

    page.get_by_role("link", name="Waiting for a decision").click()
    page.wait_for_load_state()
    assert sorted(listed(page)) == sorted([runs["waiting"], runs["support"]])

    page.goto(base + "/?status=suspended&agent=billing")
    assert listed(page) == [runs["waiting"]]
    page.goto(base + "/?status=denied")
    assert listed(page) == []
    assert "No runs match (status denied)." in page.inner_text("main")


def test_pages_follow_one_another(desk: tuple[str, dict[str, str]], page: Any) -> None:
    """One run a page, then pages of the billing agent's runs: each run once."""
    base, runs = desk
    everything = every_page(page, base + "/?limit=1")
    assert sorted(everything) == sorted(runs.values())
    billing = every_page(page, base + "/?limit=1&agent=billing")
    assert sorted(billing) == sorted([runs["waiting"], runs["done"], runs["doubt"]])
    two = every_page(page, base + "/?limit=2&status=suspended")
    assert sorted(two) == sorted([runs["waiting"], runs["support"]])


def test_bad_filters_are_refused(desk: tuple[str, dict[str, str]], page: Any) -> None:
    base, _runs = desk
    for query, message in (
        ("status=bogus", "status must be one of running, suspended"),
        ("recoverable=maybe", "recoverable must be true or false"),
        ("limit=0", "limit must be a whole number from 1 to 200"),
        ("cursor=not-a-cursor", "cursor is not one list_agent_runs returned"),
    ):
        answer = page.goto(f"{base}/?{query}")
        assert answer.status == 400, query
        assert message in page.inner_text("body"), query


def test_an_unreadable_record_is_named_not_hidden(sqlite_database: Database, page: Any) -> None:
    """One run row rewritten with ``sqlite3`` so it cannot be decoded: the list still shows the
    other run, and names the unreadable record's key with the store's reason."""
    host = Host()
    good = seed(sqlite_database, host, ["A-1"])
    bad = seed(sqlite_database, host, ["B-2"])
    path = sqlite_database.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        table = f"{sqlite_database.prefix}checkpoints"
        db.execute(f"UPDATE {table} SET value = '{{\"status\": ' WHERE key = ?", (bad,))
    with serving(sqlite_database, host) as (base, _app):
        page.goto(base + "/")
        assert listed(page) == [good]
        note = page.get_by_role("region", name="Unreadable records")
        assert "1 stored record(s) on this page could not be read" in note.inner_text()
        assert bad in note.inner_text()
        assert "corrupt" in note.inner_text()
