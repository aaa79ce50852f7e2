"""destructive-commands: each rule against commands it must and must not refuse."""

from __future__ import annotations

import pytest

from prism_core.guardrails import CompiledGuardrailPacks

from ._support import compile_packs, fired

PACK = "pack:destructive-commands/"

CASES = {
    "no-recursive-force-delete": (
        [
            "rm -rf /",
            "rm -fr build",
            "rm -Rf dist",
            "rm -rfv node_modules",
            "RM -RF /tmp/x",
            "sudo rm -rf /var/lib",
            "cd /tmp && rm -rf *",
            "/bin/rm -v -rf cache",
            "ls; rm -fR x",
        ],
        [
            "rm -r build",
            "rm -f file.txt",
            "rm file.txt",
            "rm a; ls -rf",
            "rm a && grep -rf patterns.txt .",
            "rmdir -rf x",
            "docker run --rm -fr image",
            "echo perform -rf",
        ],
    ),
    "no-long-flag-force-delete": (
        [
            "rm --recursive --force build",
            "rm --force --recursive build",
            "rm -v --force x --recursive",
            "RM --RECURSIVE --FORCE x",
        ],
        [
            "rm --recursive build",
            "rm --force file",
            "rm --recursive x; echo --force",
            "rm --force-all --recursive x",
        ],
    ),
    "no-force-push": (
        [
            "git push --force",
            "git push origin main --force",
            "git push -f origin main",
            "git -C repo push -f",
            "git push -uf origin feature",
            "GIT PUSH --FORCE",
        ],
        [
            "git push",
            "git push --force-with-lease",
            "git push origin feature-fix",
            "git push --follow-tags",
            "git commit -m wip && git push",
            "git pull -f; git push",
        ],
    ),
    "no-destructive-sql": (
        [
            "psql -c 'DROP TABLE users'",
            "sqlite3 app.db 'drop table if exists t'",
            "mysql -e 'TRUNCATE TABLE events'",
            "psql -c 'drop\ttable x'",
        ],
        [
            "psql -c 'select * from users'",
            "psql -c 'drop index idx'",
            "echo droptable",
            "psql -c 'DELETE FROM tables'",
        ],
    ),
    "no-device-overwrite": (
        [
            "mkfs /dev/sdb1",
            "mkfs.ext4 /dev/sda1",
            "sudo MKFS.XFS /dev/nvme0n1",
            "dd if=image.iso of=/dev/sdb bs=4M",
            "dd of=/dev/disk2 if=x",
        ],
        [
            "dd if=/dev/zero of=disk.img bs=1M count=10",
            "dd if=x of=/dev/null",
            "echo mkfsx",
            "ls /dev/sdb",
            "dd if=/dev/sda of=backup.img",
        ],
    ),
}


@pytest.fixture(scope="module")
def compiled() -> CompiledGuardrailPacks:
    return compile_packs(["destructive-commands"])


@pytest.mark.parametrize(
    ("rule", "command"),
    [(rule, command) for rule, (hits, _) in CASES.items() for command in hits],
)
def test_rule_refuses(compiled: CompiledGuardrailPacks, rule: str, command: str) -> None:
    assert PACK + rule in fired(compiled, "shell", {"command": command})


@pytest.mark.parametrize(
    ("rule", "command"),
    [(rule, command) for rule, (_, misses) in CASES.items() for command in misses],
)
def test_rule_allows(compiled: CompiledGuardrailPacks, rule: str, command: str) -> None:
    assert PACK + rule not in fired(compiled, "shell", {"command": command})


def test_only_the_shell_command_is_checked(compiled: CompiledGuardrailPacks) -> None:
    assert fired(compiled, "write", {"command": "rm -rf /"}) == set()
    assert fired(compiled, "shell", {"description": "rm -rf /", "command": "ls"}) == set()


def test_harmless_commands_pass_every_rule(compiled: CompiledGuardrailPacks) -> None:
    assert fired(compiled, "shell", {"command": "pytest -q && git status"}) == set()
