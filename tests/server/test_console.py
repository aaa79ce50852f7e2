"""The console in headless Chromium (the distribution's package, driven by Playwright).

Each test writes a screenshot of every page it visits under its tmp dir. No browser is
downloaded: Playwright drives ``/usr/bin/chromium`` (see ``_browser``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._browser import chromium, phone, serving, shot, wait_for_result
from ._support import Database, Host, make_in_doubt, seed, stored


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for this module's tests."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def host() -> Host:
    """The host application (its refund log starts empty)."""
    return Host()


@pytest.fixture
def console(sqlite_database: Database, host: Host) -> Iterator[str]:
    """The app's base URL on loopback."""
    with serving(sqlite_database, host) as (base, _app):
        yield base


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A phone-sized page of its own."""
    with phone(browser) as tab:
        yield tab


def test_approve_from_the_list(
    console: str, page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    run_id = seed(sqlite_database, host, ["A-1"])
    page.goto(console + "/")
    assert page.title() == "Acme approvals"
    row = page.get_by_role("row").filter(has_text=run_id)
    assert "billing" in row.inner_text()
    assert "1 decision(s) waiting" in row.inner_text()
    shot(page, tmp_path, "list")
    page.get_by_role("link", name=run_id).click()
    page.get_by_role("heading", name="refund (tool_approval)").wait_for()
    assert '"order": "A-1"' in page.locator("pre").first.inner_text()
    shot(page, tmp_path, "run")
    page.get_by_role("button", name="Approve", exact=True).click()
    assert "succeeded" in wait_for_result(page)
    types = page.locator("#events li").evaluate_all("items => items.map(i => i.dataset.type)")
    # The run's progress in its worker, observed from the stores.
    assert "tool_execution_finished" in types
    assert "agent_finished" in types
    shot(page, tmp_path, "approved")
    assert host.refunds == ["A-1"]
    assert stored(sqlite_database, run_id)[1] == "succeeded"


def test_edit_arguments_shows_schema_errors_then_approves(
    console: str, page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    run_id = seed(sqlite_database, host, ["A-1"])
    page.goto(f"{console}/runs/{run_id}")
    page.get_by_text("Edit arguments").click()
    editor = page.get_by_label("Arguments (JSON)")
    editor.fill('{"order": 7}')
    page.get_by_role("button", name="Approve with these arguments").click()
    error = page.locator(".field-error")
    error.filter(has_text="ERR_PRISM_DECISION_INVALID").wait_for(timeout=20000)
    assert "Modified arguments failed schema validation" in error.inner_text()
    shot(page, tmp_path, "schema-error")
    editor.fill("{not json")
    page.get_by_role("button", name="Approve with these arguments").click()
    error.filter(has_text="Not valid JSON").wait_for()
    editor.fill('{"order": "Z-9"}')
    page.get_by_role("button", name="Approve with these arguments").click()
    assert "succeeded" in wait_for_result(page)
    shot(page, tmp_path, "edited")
    assert host.refunds == ["Z-9"]


def test_deny(
    console: str, page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    run_id = seed(sqlite_database, host, ["A-1"])
    page.goto(f"{console}/runs/{run_id}")
    page.get_by_role("button", name="Deny").click()
    wait_for_result(page)
    shot(page, tmp_path, "denied")
    assert host.refunds == []


def test_a_stale_page_says_someone_else_decided(
    console: str, browser: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    run_id = seed(sqlite_database, host, ["A-1"])
    first, second = browser.new_page(), browser.new_page()
    try:
        for tab in (first, second):
            tab.goto(f"{console}/runs/{run_id}")
        first.get_by_role("button", name="Approve", exact=True).click()
        wait_for_result(first)
        second.get_by_role("button", name="Approve", exact=True).click()
        second.get_by_role("status").filter(has_text="Someone else decided").wait_for()
        shot(second, tmp_path, "someone-else-decided")
    finally:
        first.close()
        second.close()
    assert host.refunds == ["A-1"]


def test_in_doubt_calls_offer_their_resolutions(
    console: str, page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    run_id = seed(sqlite_database, host, ["A-1", "B-2"])
    make_in_doubt(sqlite_database, run_id)
    page.goto(console + "/")
    assert "in doubt: c1" in page.get_by_role("row").filter(has_text=run_id).inner_text()
    page.get_by_role("link", name=run_id).click()
    card = page.locator('section[data-call="c1"]')
    assert "refund (in doubt)" in card.get_by_role("heading").inner_text()
    assert '"order": "A-1"' in card.locator("pre").inner_text()
    for name in ("It completed (with this result)", "It did not start", "Mark failed"):
        assert card.get_by_role("button", name=name).is_enabled()
    shot(page, tmp_path, "in-doubt")
    assert host.refunds == []


def test_unknown_runs_are_404_pages(console: str, page: Any) -> None:
    answer = page.goto(f"{console}/runs/nothing-here")
    assert answer.status == 404
    assert "No such run." in page.inner_text("body")


def test_approve_for_this_run_and_answer_an_elicitation(
    console: str, page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    approved = seed(sqlite_database, host, ["A-1"])
    page.goto(f"{console}/runs/{approved}")
    page.get_by_role("button", name="Approve for this run").click()
    assert "succeeded" in wait_for_result(page)
    asked = seed(sqlite_database, host, ["ASK"])
    page.goto(f"{console}/runs/{asked}")
    page.get_by_role("heading", name="confirm (elicitation)").wait_for()
    # An elicitation is answered or denied; a plain approval of it is refused by the core.
    card = page.locator("section[data-approval]")
    assert card.get_by_role("button").all_inner_texts() == ["Send answer", "Deny"]
    answer = page.get_by_label("Your answer (JSON)")
    answer.fill('{"approved_by": 7}')
    page.get_by_role("button", name="Send answer").click()
    page.locator(".field-error").filter(has_text="ERR_PRISM_DECISION_INVALID").wait_for()
    answer.fill('{"approved_by": "Ana"}')
    page.get_by_role("button", name="Send answer").click()
    assert "succeeded" in wait_for_result(page)
    shot(page, tmp_path, "answered")
    assert host.refunds == ["A-1"]


def test_an_in_doubt_call_that_did_not_start_runs_once_after_the_resolution(
    console: str, page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    """ "It did not start" continues the run: the in-doubt refund runs exactly once."""
    run_id = seed(sqlite_database, host, ["A-1", "B-2"])
    make_in_doubt(sqlite_database, run_id)
    page.goto(f"{console}/runs/{run_id}")
    card = page.locator('section[data-call="c1"]')
    card.get_by_role("button", name="It did not start").click()
    assert "succeeded" in wait_for_result(page)
    shot(page, tmp_path, "in-doubt-resolved")
    assert sorted(host.refunds) == ["A-1", "B-2"]
    assert stored(sqlite_database, run_id)[1] == "succeeded"


def test_sign_in_with_the_default_token_through_the_form(
    browser: Any, sqlite_database: Database, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sign-in form works under the pages' content security policy (``form-action
    'self'``): the token lands in its cookie and the list shows the run."""
    run_id = seed(sqlite_database, host, ["A-1"])
    monkeypatch.setenv("PRISM_SERVER_TOKEN", "s3cret-token")
    with serving(sqlite_database, host) as (base, _app), phone(browser) as tab:
        tab.goto(base + "/")
        assert tab.url == base + "/login"
        tab.get_by_label("Access token").fill("s3cret-token")
        tab.get_by_role("button", name="Sign in").click()
        tab.get_by_role("link", name=run_id).wait_for(timeout=20000)
        assert tab.url == base + "/"
        cookie = next(c for c in tab.context.cookies() if c["name"] == "prism_token")
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Strict"
