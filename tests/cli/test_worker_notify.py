"""``prism worker --notify URL``: a webhook signed with ``PRISM_NOTIFY_SECRET``, and the
notifiers of the plugins installed under the ``prism.notifiers`` entry-point group."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from prism_cli import _worker
from prism_core import NotifierConfigError, WebhookNotifier
from prism_core.hookspecs import hookimpl
from prism_core.plugins import NOTIFIER_GROUP


class _Pager:
    async def deliver(self, notification: Any) -> None:
        return None


class _PagerPlugin:
    pager = _Pager()

    @hookimpl
    def prism_notifiers(self) -> list[Any]:
        return [self.pager]


def _args(*notify: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    _worker.command.configure(parser)
    argv = ["--store", "memory://", "--app", "m:a"]
    for url in notify:
        argv += ["--notify", url]
    return parser.parse_args(argv)


def test_notify_needs_the_secret_and_installed_notifier_plugins_are_added(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def discover(group: str = "prism") -> list[Any]:
        asked.append(group)
        return [_PagerPlugin()]

    monkeypatch.setattr(_worker, "discover_plugins", discover)
    monkeypatch.delenv("PRISM_NOTIFY_SECRET", raising=False)
    with pytest.raises(NotifierConfigError, match="PRISM_NOTIFY_SECRET"):
        _worker.notifiers_from(_args("https://hooks.example.com/prism"))
    monkeypatch.setenv("PRISM_NOTIFY_SECRET", "whsec-cli")
    webhook, pager = _worker.notifiers_from(_args("https://hooks.example.com/prism"))
    assert isinstance(webhook, WebhookNotifier)
    assert webhook.url == "https://hooks.example.com/prism"
    assert pager is _PagerPlugin.pager
    assert _worker.notifiers_from(_args()) == [_PagerPlugin.pager]
    assert set(asked) == {NOTIFIER_GROUP}
