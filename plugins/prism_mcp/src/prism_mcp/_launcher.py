"""Runs a stdio MCP server so that it dies with the process that started it.

    python -I -S _launcher.py PARENT_PID COMMAND [ARG...]

The SDK starts every stdio server in a session of its own (so that closing the block can
stop the whole process tree), which also means a worker that is SIGKILLed leaves the server
running: it would go on to finish, seconds later, a call the durable run already holds in
doubt. This small supervisor, started in the server's place (stdlib only, no site packages),
closes that gap:

- on Linux it asks the kernel (``prctl(PR_SET_PDEATHSIG)``) for ``SIGTERM`` the moment its
  parent dies, so no polling delay; elsewhere it polls ``getppid()`` every 0.1 s;
- it starts the server as its child, in its own process group (the SDK made the supervisor a
  session leader), the server inheriting stdin, stdout and stderr: no bytes pass through it;
- on ``SIGTERM``, ``SIGHUP`` or ``SIGINT`` (the parent's death, or the SDK stopping the
  server) it SIGKILLs the whole process group, the server's own children included.

A watchdog pipe would work on every POSIX system but needs a descriptor the SDK's process
start does not pass on; the parent-death signal needs nothing from the parent. A server that
leaves the process group on purpose (``setsid``, a daemon) escapes this, as it escapes the
SDK's own shutdown.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
#: Seconds between two looks at the parent where the kernel cannot signal its death.
POLL_SECONDS = 0.1


def _kill_group(*_: Any) -> None:
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Supervise ``argv[2:]`` for the parent ``argv[1]``; the server's exit status."""
    parent, command = int(argv[1]), argv[2:]
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(number, _kill_group)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            sys.stderr.write("prism_mcp launcher: prctl(PR_SET_PDEATHSIG) failed\n")
            return 126
    # The parent may have died before the death signal was asked for.
    if os.getppid() != parent:
        _kill_group()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        sys.stderr.write(f"prism_mcp launcher: cannot start {command[0]!r}: {exc}\n")
        return 127
    while True:
        try:
            code = child.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                _kill_group()
            continue
        return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
