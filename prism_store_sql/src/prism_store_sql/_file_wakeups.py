"""Run wake-ups on a SQLite file: one Unix datagram socket per open watch, beside the file.

The processes that share a SQLite file share a machine (SQLite's locks need one kernel), so
a decision recorded in one of them reaches a worker waiting in another through the file
system, without a server and without polling:

- The directory ``<database>.prism-wake/`` beside the database file (its real path, symlinks
  resolved, so every process that opens the file finds the same directory) holds one socket
  per open watch, named ``<tag>-<random>.sock``. ``<tag>`` is 8 hex digits of the SHA-256 of
  the table prefix, so the watches of another prefix in the same file are not woken.
- :meth:`FileWakeups.notify_runs` lists the directory and sends a one-byte datagram, without
  blocking, to each socket of its prefix: a few system calls, no thread hand-off. A socket
  whose owner is gone (a process that died without removing it: the kernel refuses the
  datagram) is removed; a full receive buffer means that watch has a wake-up pending already
  (they coalesce) and is skipped; a socket it may not write (another user's) is skipped,
  with one warning. It never blocks and never raises for a watch.
- A watch binds its socket, waits with anyio until it is readable (asyncio and trio alike)
  and drains every datagram at once, so several notifications coalesce into one wake-up.
  Leaving the watch closes the socket and removes its file. A watch whose file was removed
  under it (someone cleaned the directory) binds a new one at its next timeout and reports a
  wake-up then, since one may have been missed.

Permissions follow the database file, as SQLite's own ``-wal`` and ``-shm`` files do: the
directory is created with the file's permission bits (plus search where it may be read) and
each socket gets the file's read and write bits, so whoever may write the database may wake
its workers, and nobody else.

Limits, and what happens at them:

- A Unix socket's path is limited (108 bytes on Linux, 104 on macOS). A socket whose path
  would be longer than :data:`MAX_ADDRESS` is reached through a descriptor of its directory
  (``/proc/self/fd/<n>/<name>``) where ``/proc`` offers that (Linux).
- Where no Unix datagram socket can be made there (no ``AF_UNIX``, as on Windows; a path too
  long without ``/proc``; a directory that cannot be created or a file system that refuses
  sockets), a watch falls back to the in-process form for this file and prefix, with one
  warning: workers in the same process are still woken at once, workers in other processes
  find the decision at their poll.
- An in-memory database exists in one process only: its stores use the in-process form
  (:class:`~prism_core.stores.LocalWakeups`), one per connection (see :mod:`._wakeups`).

It signals; it must not read or write the database.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import secrets
import socket
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress

import anyio

from prism_core.stores import LocalWakeups, RunWatch

__all__ = ("MAX_ADDRESS", "WAKE_SUFFIX", "FileWakeups", "socket_tag", "wake_directory")

logger = logging.getLogger(__package__ or __name__)

#: What a database file's wake-up directory is named after (``<database>.prism-wake``).
WAKE_SUFFIX = ".prism-wake"
#: The longest socket path bound or addressed directly (below every platform's limit).
MAX_ADDRESS = 100
_SUFFIX = ".sock"
_NAME_CHARS = len("00000000-") + 16 + len(_SUFFIX)
_PROC_FD = "/proc/self/fd"
_HAS_UNIX = hasattr(socket, "AF_UNIX")

#: In-process watches of the files whose sockets could not be made, by (directory, tag).
_FALLBACK: dict[tuple[str, str], LocalWakeups] = {}
#: What was already warned about once, so a worker's loop does not repeat it.
_WARNED: set[tuple[str, str]] = set()


def wake_directory(database: str) -> str:
    """The wake-up directory of the SQLite file ``database`` (its real path)."""
    return os.path.realpath(database) + WAKE_SUFFIX


def socket_tag(prefix: str) -> str:
    """The start of the socket names of the watches on table prefix ``prefix``."""
    return hashlib.sha256(prefix.encode()).hexdigest()[:8]


def _warn_once(what: str, key: str, message: str, *args: object) -> None:
    if (what, key) not in _WARNED:
        _WARNED.add((what, key))
        logger.warning(message, *args)


def _open_base(directory: str) -> tuple[str, int | None]:
    """``(base, fd)``: socket addresses in ``directory`` are ``base + name``; ``fd`` is a
    descriptor of the directory the addresses go through (``None`` when its own path is
    short enough), for the caller to close."""
    if len(os.fsencode(directory)) + 1 + _NAME_CHARS <= MAX_ADDRESS:
        return directory + os.sep, None
    if not os.path.isdir(_PROC_FD):
        raise OSError(errno.ENAMETOOLONG, "socket path too long and no /proc/self/fd", directory)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    return f"{_PROC_FD}/{fd}/", fd


@contextmanager
def _addressing(directory: str) -> Iterator[tuple[str, int | None]]:
    """:func:`_open_base` for the length of the block."""
    base, fd = _open_base(directory)
    try:
        yield base, fd
    finally:
        if fd is not None:
            os.close(fd)


def _modes(database: str) -> tuple[int, int] | None:
    """The directory's and a socket's permission bits, from the database file's."""
    try:
        bits = stat.S_IMODE(os.stat(database).st_mode) & 0o666
    except OSError:
        return None
    return bits | ((bits & 0o444) >> 2), bits


class FileWakeups:
    """:class:`~prism_core.stores.RunWakeups` for the table prefix ``prefix`` of the SQLite
    file ``database`` (see the module docstring)."""

    def __init__(self, database: str, prefix: str) -> None:
        self.database = os.path.realpath(database)
        self.directory = self.database + WAKE_SUFFIX
        self.tag = socket_tag(prefix)

    def _fallback(self) -> LocalWakeups:
        key = (self.directory, self.tag)
        found = _FALLBACK.get(key)
        if found is None:
            found = _FALLBACK[key] = LocalWakeups()
        return found

    async def notify_runs(self) -> None:
        """Wake every watch on this file and prefix, in this process and others."""
        fallback = _FALLBACK.get((self.directory, self.tag))
        if fallback is not None:
            await fallback.notify_runs()
        if _HAS_UNIX:
            self._send_all()

    def _send_all(self) -> None:
        try:
            with _addressing(self.directory) as (base, fd):
                names = os.listdir(self.directory if fd is None else fd)
                mine = [n for n in names if n.startswith(self.tag) and n.endswith(_SUFFIX)]
                if not mine:
                    return
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
                    sender.setblocking(False)
                    for name in mine:
                        self._send(sender, base + name)
        except FileNotFoundError:
            return  # no watch was ever opened on this file
        except OSError as exc:
            _warn_once(
                "notify", self.directory, "cannot wake the workers of %s: %s", self.database, exc
            )

    def _send(self, sender: socket.socket, address: str) -> None:
        try:
            sender.sendto(b"w", address)
        except ConnectionRefusedError:
            # Nobody reads this socket any more: its process died without removing it.
            with suppress(FileNotFoundError, PermissionError):
                os.unlink(address)
        except (BlockingIOError, FileNotFoundError):
            # A full buffer holds wake-ups already (they coalesce); a removed file closed.
            return
        except OSError as exc:
            _warn_once("send", self.directory, "cannot wake a worker on %s: %s", address, exc)

    @asynccontextmanager
    async def watch_runs(self) -> AsyncIterator[RunWatch]:
        """A watch of this file's and prefix's notifications (see the module docstring)."""
        watch = _SocketWatch(self)
        try:
            watch.bind()
        except OSError as exc:
            watch.close()
            _warn_once(
                "watch",
                self.directory,
                "workers in other processes cannot wake this one on %s (%s): a decision "
                "recorded there reaches it at its poll",
                self.database,
                exc,
            )
            async with self._fallback().watch_runs() as local:
                yield local
            return
        try:
            yield watch
        finally:
            watch.close()


class _SocketWatch:
    """One bound socket in the wake-up directory; closed (and its file removed) at the end."""

    def __init__(self, wakeups: FileWakeups) -> None:
        self._wakeups = wakeups
        self._socket: socket.socket | None = None
        self._fd: int | None = None
        self._address = ""
        self._inode = 0

    def bind(self) -> None:
        """Create the directory when needed, then bind a new socket in it."""
        if not _HAS_UNIX:
            raise OSError(errno.EAFNOSUPPORT, "no Unix sockets on this platform")
        wakeups = self._wakeups
        modes = _modes(wakeups.database)
        try:
            os.mkdir(wakeups.directory, 0o700)
        except FileExistsError:
            pass
        else:
            if modes is not None:
                os.chmod(wakeups.directory, modes[0])
        # The directory's descriptor (for a long path) lives as long as the socket.
        base, self._fd = _open_base(wakeups.directory)
        self._address = f"{base}{wakeups.tag}-{secrets.token_hex(8)}{_SUFFIX}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.bind(self._address)
            self._inode = os.stat(self._address).st_ino
            if modes is not None:
                os.chmod(self._address, modes[1])
        except BaseException:
            sock.close()
            self._unlink()
            raise
        self._socket = sock

    def _drain(self) -> bool:
        sock = self._socket
        if sock is None:
            return False
        woken = False
        while True:
            try:
                sock.recv(64)
            except (BlockingIOError, InterruptedError):
                return woken
            woken = True

    def _bound(self) -> bool:
        try:
            return os.stat(self._address).st_ino == self._inode
        except OSError:
            return False

    async def wait(self, seconds: float) -> bool:
        """``True`` once a datagram arrived since the last call, ``False`` after
        ``seconds`` without one (see the module docstring)."""
        if self._drain():
            return True
        sock = self._socket
        if sock is not None:
            with anyio.move_on_after(seconds):
                await anyio.wait_readable(sock)
        else:
            await anyio.sleep(seconds)
        if self._drain():
            return True
        if self._bound():
            return False
        # The file went away under this watch: bind again, and report what may be missed.
        self.close()
        try:
            self.bind()
        except OSError as exc:
            _warn_once("rebind", self._wakeups.directory, "cannot watch again: %s", exc)
        return True

    def _unlink(self) -> None:
        # Only the file this watch bound (a directory cleaned under it may hold another).
        if self._inode and self._bound():
            with suppress(OSError):
                os.unlink(self._address)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._address, self._inode = "", 0

    def close(self) -> None:
        """Close the socket and remove its file (idempotent)."""
        sock, self._socket = self._socket, None
        if sock is not None:
            anyio.notify_closing(sock)
            sock.close()
        self._unlink()
