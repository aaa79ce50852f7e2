"""What the console's browser tests share: the Chromium they drive, the app on loopback,
screenshots and the streamed result line.

No browser is downloaded: Playwright drives Debian's ``/usr/bin/chromium``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from prism_server import create_app

from ._support import Database, Host, running

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """One headless Chromium, closed on the way out."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def serving(db: Database, host: Host) -> Iterator[tuple[str, Any]]:
    """The app over ``db`` on loopback (no token: loopback clients are the one tenant); yields
    its base URL and the app."""
    checkpoints, sessions = db.stores()
    app = create_app(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=host.resolve_agent,
        title="Acme approvals",
    )
    with running(app, checkpoints, sessions) as base:
        yield base, app


@contextmanager
def phone(browser: Any) -> Iterator[Any]:
    """A phone-sized page of its own."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        yield context.new_page()
    finally:
        context.close()


def shot(page: Any, tmp_path: Path, name: str) -> None:
    """A full-page screenshot under the test's tmp dir."""
    path = tmp_path / "screenshots" / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def wait_for_result(page: Any) -> str:
    """The text of the resumed run's closing ``result`` line."""
    item = page.locator('#events li[data-type="result"]')
    item.wait_for(timeout=20000)
    return str(item.inner_text())
