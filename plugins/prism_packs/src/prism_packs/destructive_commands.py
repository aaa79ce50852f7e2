"""``destructive-commands``: refuse shell commands that destroy data beyond an easy undo.

Each rule is a case-insensitive pattern on the ``command`` argument of the ``shell`` tool.
A pattern only looks within one command segment (segments are split by ``;``, ``&&``,
``||``, ``|`` and newlines), so ``rm a; ls -rf`` is not a forced delete. Patterns are a
seatbelt for honest mistakes, not a sandbox: an obfuscated command can slip past them.
"""

from __future__ import annotations

from prism_core.guardrails import GuardrailPack, PackRule

__all__ = ("DESTRUCTIVE_COMMANDS",)

# Building blocks: the rest of one command segment, and a whole-word boundary that also
# treats "-" as part of a word (so "--rm" is not "rm").
_SEGMENT = r"[^;&|\n]*"
_START = r"(?<![\w-])"
_END = r"(?![\w-])"
_ARG = r"(?<!\S)"
_ARG_END = r"(?!\S)"


def _shell_rule(rule_id: str, pattern: str, reason: str) -> PackRule:
    return PackRule(
        id=rule_id, tool="shell", arg_path="command", pattern="(?i)" + pattern, reason=reason
    )


DESTRUCTIVE_COMMANDS = GuardrailPack(
    id="destructive-commands",
    version=1,
    description="Refuses recursive force deletes, force pushes, destructive SQL and disk wipes.",
    rules=(
        _shell_rule(
            "no-recursive-force-delete",
            # rm, then a single-dash flag cluster holding both r and f: -rf, -fr, -Rf, -rfv.
            rf"{_START}rm{_END}{_SEGMENT}{_ARG}-[a-z]*(?:r[a-z]*f|f[a-z]*r)[a-z]*{_ARG_END}",
            "Recursive force deletes are not allowed",
        ),
        _shell_rule(
            "no-long-flag-force-delete",
            rf"{_START}rm{_END}(?={_SEGMENT}{_ARG}--recursive{_ARG_END})"
            rf"{_SEGMENT}{_ARG}--force{_ARG_END}",
            "Recursive force deletes are not allowed",
        ),
        _shell_rule(
            "no-force-push",
            # --force or a short cluster holding f; --force-with-lease is the safe form.
            rf"{_START}git{_END}{_SEGMENT}{_ARG}push{_ARG_END}{_SEGMENT}"
            rf"{_ARG}(?:--force|-[a-z]*f[a-z]*){_ARG_END}",
            "Force pushes are not allowed; use --force-with-lease",
        ),
        _shell_rule(
            "no-destructive-sql",
            r"\b(?:drop|truncate)\s+table\b",
            "DROP TABLE and TRUNCATE TABLE are not allowed",
        ),
        _shell_rule(
            "no-device-overwrite",
            rf"{_START}mkfs(?:\.\w+)?{_END}"
            rf"|{_START}dd{_END}{_SEGMENT}{_ARG}of=/dev/(?!(?:null|zero|stdout|stderr)\b)",
            "Formatting filesystems and writing to devices are not allowed",
        ),
    ),
)
