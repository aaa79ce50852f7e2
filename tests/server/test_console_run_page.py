"""A run's page in headless Chromium: the conversation that led to the call, reasons on
denials, a readable result for finished runs, the audit, and stored markup shown inert."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._browser import chromium, phone, serving, shot, wait_for_result
from ._support import Database, Host, seed, stored_run

#: Markup a model, a tool or a person could get stored; each would set ``window.__pwned``.
MARKUP = (
    "<script>window.__pwned=1</script>",
    "<img/src=x/onerror=window.__pwned=2>",
    "<svg/onload=window.__pwned=3>",
)


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
def served(sqlite_database: Database, host: Host) -> Iterator[tuple[str, Any]]:
    """The app's base URL on loopback, and the app."""
    with serving(sqlite_database, host) as both:
        yield both


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A phone-sized page of its own."""
    with phone(browser) as tab:
        yield tab


def conversation(page: Any) -> list[str]:
    """The conversation's items as their visible text, in order."""
    items = page.locator(".conversation > li")
    return [str(text) for text in items.all_inner_texts()]


def test_the_conversation_that_led_to_the_call(
    served: tuple[str, Any], page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    """An earlier request of the session, its call, its result and the answer come first;
    this run's request and its call, marked as the one waiting, after a divider."""
    base, _app = served
    run_id = seed(sqlite_database, host, ["A-1"], earlier=["Z-1"])
    page.goto(f"{base}/runs/{run_id}")
    items = conversation(page)
    assert len(items) == 7, items
    assert items[0].startswith("User")
    assert items[0].endswith("Z-1")
    assert "Calls refund c1" in items[1]
    assert '"order": "Z-1"' in items[1]
    assert "refund c1 returned" in items[2]
    assert '"refunded": "Z-1"' in items[2]
    assert items[3].startswith("Assistant")
    assert items[3].endswith("refunds settled")
    assert items[4] == "This run starts here"
    assert items[5].startswith("User")
    assert items[5].endswith("A-1")
    assert "Calls refund c2" in items[6]
    assert "waiting for a decision" in items[6]
    card = page.locator("section[data-approval]")
    tag = page.locator('.conversation a.tag[href^="#card-"]')
    assert tag.get_attribute("href") == "#card-" + str(card.get_attribute("data-approval"))
    assert host.refunds == ["Z-1"]
    shot(page, tmp_path, "conversation")


def test_the_conversation_passes_through_the_hosts_redactor(
    browser: Any, sqlite_database: Database
) -> None:
    """A value stored before the host knew it as a secret is redacted when shown."""
    run_id = seed(sqlite_database, Host(), ["A-1"], earlier=["tok-8c1d"])
    with (
        serving(sqlite_database, Host(secrets=["tok-8c1d"])) as (base, _app),
        phone(browser) as tab,
    ):
        tab.goto(f"{base}/runs/{run_id}")
        items = conversation(tab)
        assert items[0].endswith("[REDACTED]")
        assert '"order": "[REDACTED]"' in items[1]
        assert "tok-8c1d" not in tab.content()


def test_a_denial_with_a_reason_reaches_the_model_and_the_page_reads_as_a_result(
    served: tuple[str, Any], page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    base, _app = served
    run_id = seed(sqlite_database, host, ["A-1"])
    reason = "A-1 was refunded by phone on Monday"
    page.goto(f"{base}/runs/{run_id}")
    page.get_by_label("Your reason (optional)").fill(reason)
    page.get_by_role("button", name="Deny").click()
    assert wait_for_result(page) == "Result: succeeded - refunds settled"
    blocked = page.locator('#events li[data-type="tool_execution_blocked"]').inner_text()
    assert blocked == f"refund did not run (approval_rejected): {reason} (approval_rejected)"
    shot(page, tmp_path, "denied-live")
    assert stored_run(sqlite_database, run_id)[1] == {"c1": reason}
    assert host.refunds == []

    page.goto(f"{base}/runs/{run_id}")
    result = page.locator("section.result")
    assert "succeeded The run succeeded." in result.inner_text()
    assert result.locator(".answer").inner_text() == "refunds settled"
    assert page.get_by_role("heading", name="Waiting for your decision").count() == 0
    assert page.locator("button[data-action]").count() == 0
    items = conversation(page)
    assert "refund c1 did not succeed" in items[2]
    error = page.locator(".conversation .tool-result .error-text")
    assert error.inner_text() == f"approval_rejected: {reason}"
    assert items[3].endswith("refunds settled")
    shot(page, tmp_path, "finished")


def test_deny_all_rejects_every_pending_call_with_one_reason(
    served: tuple[str, Any], page: Any, host: Host, sqlite_database: Database, tmp_path: Path
) -> None:
    base, _app = served
    run_id = seed(sqlite_database, host, ["A-1", "B-2"])
    page.goto(f"{base}/runs/{run_id}")
    everything = page.locator("#card-all")
    everything.get_by_label("Your reason (optional)").fill("duplicate ticket")
    shot(page, tmp_path, "deny-all")
    everything.get_by_role("button", name="Deny all 2 calls").click()
    assert "succeeded" in wait_for_result(page)
    assert stored_run(sqlite_database, run_id)[1] == {
        "c1": "duplicate ticket",
        "c2": "duplicate ticket",
    }
    assert host.refunds == []


#: Decision records in the shape of ``DecisionRecord`` (``AgentRunStatus.audit``) as the run
#: detail carries them under ``audit``, one holding markup.
AUDIT = [
    {
        "approval_id": "appr_0123",
        "tool_call_id": "c1",
        "tool_name": "refund",
        "outcome": "reject_once",
        "actor": "ana@acme.example",
        "reason": "Refunded by phone <b>already</b>",
        "arguments_hash": "sha256:" + "ab" * 32,
        "decided_at": 1767225600.0,
        "version": 1,
    },
    {
        "approval_id": None,
        "tool_call_id": "c2",
        "tool_name": "refund",
        "outcome": "completed",
        "actor": MARKUP[0],
        "reason": None,
        "arguments_hash": "sha256:" + "cd" * 32,
        "decided_at": 1767225661.5,
        "version": 2,
    },
]


def test_the_audit_from_the_run_detail(
    served: tuple[str, Any],
    page: Any,
    host: Host,
    sqlite_database: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run detail's ``audit`` list is a table on the run page, finished runs included
    (a stand-in detail: the records are given, the run is real)."""
    base, app = served
    context = app.state.prism
    real_detail = context.detail

    async def detail_with_audit(run_id: str, scope: Any) -> dict[str, Any]:
        return {**await real_detail(run_id, scope), "audit": AUDIT}

    monkeypatch.setattr(context, "detail", detail_with_audit)
    run_id = seed(sqlite_database, host, ["A-1"])
    page.goto(f"{base}/runs/{run_id}")
    page.get_by_role("button", name="Approve", exact=True).click()
    wait_for_result(page)
    page.goto(f"{base}/runs/{run_id}")
    assert "succeeded" in page.locator("section.result").inner_text()
    audit = page.locator("section.audit")
    assert audit.get_by_role("heading").inner_text() == "Decisions"
    rows = audit.locator("tbody tr")
    assert rows.count() == 2
    first = [str(cell) for cell in rows.nth(0).locator("td").all_inner_texts()]
    assert first == [
        "2026-01-01 00:00:00 UTC",
        "ana@acme.example",
        "refund c1",
        "denied (reject_once)",
        "Refunded by phone <b>already</b>",
        f"version 1; arguments sha256:{'ab' * 32}; approval appr_0123",
    ]
    second = [str(cell) for cell in rows.nth(1).locator("td").all_inner_texts()]
    assert second[:4] == [
        "2026-01-01 00:01:01 UTC",
        MARKUP[0],
        "refund c2",
        "marked completed (completed)",
    ]
    assert rows.nth(0).locator("time").get_attribute("datetime") == "2026-01-01T00:00:00Z"
    assert audit.locator("b, script").count() == 0
    assert page.evaluate("window.__pwned") is None
    shot(page, tmp_path, "audit")


def test_a_finished_runs_page_shows_its_recorded_audit(
    served: tuple[str, Any], page: Any, host: Host, sqlite_database: Database
) -> None:
    """Approve on the page; once the run has finished its page lists the recorded decision:
    when, who (the console's caller: the default token names nobody, so the console's name),
    the call, the outcome (the kernel's record, no stand-in), on the ``console`` channel."""
    base, _app = served
    run_id = seed(sqlite_database, host, ["A-1"])
    page.goto(f"{base}/runs/{run_id}")
    assert "No decision is recorded for this run yet." in page.locator("section.audit").inner_text()
    page.get_by_role("button", name="Approve", exact=True).click()
    assert "succeeded" in wait_for_result(page)
    page.goto(f"{base}/runs/{run_id}")
    assert "succeeded" in page.locator("section.result").inner_text()
    rows = page.locator("section.audit tbody tr")
    assert rows.count() == 2
    cells = [str(cell) for cell in rows.nth(0).locator("td").all_inner_texts()]
    assert cells[0].endswith(" UTC")
    assert cells[1:4] == ["console", "refund c1", "approved (allow_once)"]
    assert cells[5].startswith("version 1; arguments ")
    # Then the receipt of the refund that ran: the server's process, on channel "worker".
    receipt = [str(cell) for cell in rows.nth(1).locator("td").all_inner_texts()]
    assert receipt[2:4] == ["refund c1", "ran (executed)"]
    assert receipt[5].endswith("via worker")
    recorded = stored_run(sqlite_database, run_id)[0]["audit"]
    first = recorded[0]
    assert (first["actor"], first["channel"], first["outcome"]) == (
        "console",
        "console",
        "allow_once",
    )
    assert [r["outcome"] for r in recorded] == ["allow_once", "executed"]
    assert host.refunds == ["A-1"]


def test_stored_markup_is_shown_as_text(
    served: tuple[str, Any], page: Any, host: Host, sqlite_database: Database
) -> None:
    """Markup in a request, in tool arguments, in tool errors and in a filter value is shown
    as the text it is and never runs; the pages allow only their own script."""
    base, _app = served
    run_id = seed(sqlite_database, host, ["A-1", MARKUP[0], MARKUP[1]], earlier=[MARKUP[2]])
    answer = page.goto(f"{base}/runs/{run_id}")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'nonce-" in policy
    assert "unsafe-inline" not in policy
    text = page.locator(".conversation").inner_text()
    for markup in MARKUP:
        assert markup in text
    assert page.locator("script").count() == 1
    assert page.locator("main img, main svg, main script").count() == 0
    assert page.evaluate("window.__pwned") is None
    page.goto(f"{base}/?agent={MARKUP[0]}")
    assert page.get_by_label("Agent").input_value() == MARKUP[0]
    assert page.locator("script").count() == 1
    assert page.evaluate("window.__pwned") is None
    assert host.refunds == []
