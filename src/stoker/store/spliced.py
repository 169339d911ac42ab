"""Shard downloads moved from the socket into the cache file by the kernel (``os.splice``), no copy in Python.

obstore's download of a shard costs the client two copies (socket -> obstore's buffer ->
``write()`` into the page cache), on the cores the reader uses too. For an ``s3://`` store
at an ``http://`` endpoint, on Linux, :meth:`Splicer.download` does the same GET without them:

1. a GET URL presigned by obstore (``obstore.sign``, the store's own credentials and prefix);
2. a plain socket (connect timeout, then the read timeout on every wait), the request sent and
   the response's head read and parsed here (only the head: the body stays in the socket);
3. the body moved socket -> pipe -> the cache's ``.part`` file with ``os.splice`` (the pipe
   enlarged with ``F_SETPIPE_SZ``; each ``splice`` into the file writes a whole pipe at an
   offset that is a multiple of the pipe's size, so the page cache keeps large folios);
4. the checksum taken by the caller over the written file through a read-only map (read from
   the page cache, not copied).

Anything that makes the response unfit before its body starts (a status other than 200, a
Content-Length other than the manifest's size, chunked transfer encoding, an https URL, a
signing, connect or header failure) raises :class:`Declined`: the caller fetches the shard with
obstore instead (which says what is wrong, a missing object say, as it always does). A failure
once the body flows (a connection closed early, a stall past the read timeout) is a
``ConnectionError`` / ``TimeoutError`` that ``Remote.call`` retries like any network fault. A cache
directory whose file system refuses ``splice`` (EINVAL, ENOSYS, EOPNOTSUPP) declines that shard and
every later one (obstore starts the file again).

The presigned URL carries a signature: it is never put in a message or an exception; messages
name the shard's ``s3://`` URL. ``STOKER_REMOTE_SPLICE`` (read when a store is opened): ``auto``
(the default) splices stores of at most :data:`AUTO_MAX_STORE` bytes, ``1`` any store, ``0`` none;
:func:`splice_reason` and :func:`size_reason` say why a store is not spliced. Why a size: a spliced
file reaches the page cache in folios no larger than a pipe (1 MiB unprivileged), which a reader
maps in 4 KiB pages; warm epochs over a spliced 1,536 MiB cache ran 6-9% below those over
obstore's (2 MiB pages), while at 128 to 1,024 MiB they did not differ, and obstore's cold epoch
fell short at 768 MiB (0.75x local) where spliced downloads did not (README, remote stores).
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import select
import socket
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stoker.errors import ConfigError

SPLICE_ENV = "STOKER_REMOTE_SPLICE"
PIPE_BYTES = 4 * 2**20  # the pipe asked for; an unprivileged process gets at most /proc/sys/fs/pipe-max-size
SIGNED_FOR = timedelta(minutes=15)  # a presigned URL's lifetime (used at once: it only has to outlive one GET)
HEAD_LIMIT = 64 * 2**10  # a response head longer than this is declined
HASH_PIECE = 8 * 2**20  # the checksum is taken over the map in pieces of this size
AUTO_MAX_STORE = 2**30  # the largest store STOKER_REMOTE_SPLICE=auto splices (see the docstring)
_MODES = {"auto": "auto", "1": "on", "on": "on", "true": "on", "0": "off", "off": "off", "false": "off"}
WRITE_ALIGN = 256 * 2**10  # a write into the file from a pipe short of full ends at a multiple of this
_REFUSED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)  # splice into a file its file system does not take


class Declined(Exception):
    """The spliced GET cannot take this shard (said before any byte of the body moved): fetch it with obstore.

    The message is a reason for counts and tests; it never holds the presigned URL.
    """


def mode() -> str:
    """``STOKER_REMOTE_SPLICE`` read now: ``"auto"`` (unset), ``"on"`` (``1``) or ``"off"`` (``0``); else a ConfigError."""
    value = os.environ.get(SPLICE_ENV, "auto").strip().lower() or "auto"
    if value not in _MODES:
        raise ConfigError(
            f"{SPLICE_ENV}={value!r}: use auto (the default: stores up to {AUTO_MAX_STORE // 2**20} MiB), "
            "1 (splice any store where possible) or 0 (never)",
            option=SPLICE_ENV,
        )
    return _MODES[value]


def splice_reason(endpoint: str) -> str:
    """Why shards of an S3 store at ``endpoint`` cannot be spliced here, or "" when they can."""
    if mode() == "off":
        return f"{SPLICE_ENV}=0"
    if not sys.platform.startswith("linux") or not hasattr(os, "splice"):
        return "os.splice is Linux-only (Python 3.10+)"
    if not endpoint.startswith("http://"):
        return "the endpoint is not plain http://"
    return ""


def size_reason(store_bytes: int) -> str:
    """Why a store of ``store_bytes`` is not spliced under ``STOKER_REMOTE_SPLICE=auto``, or ""."""
    if mode() != "auto" or store_bytes <= AUTO_MAX_STORE:
        return ""
    return (
        f"a store of {store_bytes / 2**20:,.0f} MiB, over the {AUTO_MAX_STORE // 2**20} MiB that "
        f"{SPLICE_ENV}=auto splices ({SPLICE_ENV}=1 splices any size)"
    )


class Splicer:
    """Spliced GETs of one obstore S3 store's objects, with counts of shards spliced and declined.

    ``timeouts`` are (connect, read) seconds.
    """

    def __init__(self, store: Any, timeouts: tuple[float, float]) -> None:
        self.store = store
        self.connect_s, self.read_s = timeouts
        self._lock = threading.Lock()
        self.spliced = 0  # downloads that moved their body by splice
        self.declined = 0  # downloads handed to obstore (Declined)
        self.last_declined = ""  # the reason of the last one
        self.refused = ""  # why the cache's file system took no splice: every later shard goes to obstore

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {"spliced": self.spliced, "declined": self.declined, "last_declined": self.last_declined}

    def download(self, name: str, where: str, fd: int, size: int) -> None:
        """Object ``name`` (``where``: its s3:// URL, for messages) into ``fd`` (empty, at offset 0): ``size`` bytes.

        :class:`Declined` before the body starts; ConnectionError/TimeoutError after.
        """
        if self.refused:
            self._declined(self.refused)
            raise Declined(self.refused)
        try:
            signed = self._sign(name)
            target = urlsplit(signed)
            if target.scheme != "http" or not target.hostname:
                raise Declined(f"the signed URL is {target.scheme}://, not http://")
            sock = self._open(target.hostname, target.port or 80, where)
        except Declined as exc:
            self._declined(str(exc))
            raise
        with sock:
            try:
                path = target.path + (f"?{target.query}" if target.query else "")
                request = (
                    f"GET {path} HTTP/1.1\r\nHost: {target.netloc}\r\nAccept-Encoding: identity\r\n"
                    "Connection: close\r\n\r\n"
                )
                sock.sendall(request.encode("ascii"))
                status, headers = _parse_head(_read_head(sock, where))
                problem = _unfit(status, headers, size)
            except (OSError, ValueError) as exc:  # before the body: obstore tries (and says what is wrong)
                problem = f"{type(exc).__name__} before the body"
            if problem:
                self._declined(problem)
                raise Declined(problem)
            try:
                _move(sock, fd, size, self.read_s, where)
            except OSError as exc:
                if isinstance(exc, (ConnectionError, TimeoutError)) or exc.errno not in _REFUSED:
                    raise
                self.refused = f"the cache's file system refuses splice ({errno.errorcode[exc.errno]})"
                self._declined(self.refused)  # the caller's obstore GET starts the file again
                raise Declined(self.refused) from None
        with self._lock:
            self.spliced += 1

    def _sign(self, name: str) -> str:
        import obstore

        try:
            return str(obstore.sign(self.store, "GET", name, SIGNED_FOR))
        except Exception as exc:  # noqa: BLE001 - no signing (anonymous store, odd credentials): obstore fetches
            raise Declined(f"the GET could not be presigned ({type(exc).__name__})") from None

    def _open(self, host: str, port: int, where: str) -> socket.socket:
        try:
            sock = socket.create_connection((host, port), timeout=self.connect_s)
        except OSError as exc:
            raise Declined(f"{type(exc).__name__} connecting for {where}") from None
        sock.settimeout(self.read_s)
        return sock

    def _declined(self, reason: str) -> None:
        with self._lock:
            self.declined += 1
            self.last_declined = reason


def _read_head(sock: socket.socket, where: str) -> bytes:
    """The response head (status line and headers, through the blank line), read without taking any body byte.

    Each wait is bounded by the socket's timeout. Bytes are peeked first, and only the head's are
    taken off the socket, so that the body is all there for splice.
    """
    head = b""
    while True:
        peek = sock.recv(HEAD_LIMIT, socket.MSG_PEEK)
        if not peek:
            raise ConnectionError(f"the server closed the connection before the response head of {where}")
        end = (head[-3:] + peek).find(b"\r\n\r\n")
        if end >= 0:
            take = end + 4 - len(head[-3:])
            head += _recv_exactly(sock, take)
            return head
        head += _recv_exactly(sock, len(peek))
        if len(head) > HEAD_LIMIT:
            raise ValueError("response head too long")


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        piece = sock.recv(n - len(got))
        if not piece:
            raise ConnectionError("the server closed the connection inside the response head")
        got += piece
    return got


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status code and the headers (names lowercased) of a response head; ValueError when it is not HTTP/1.x."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError("not an HTTP/1.x status line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError("a header line without a colon")
        key = key.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return int(parts[1]), headers


def _unfit(status: int, headers: dict[str, str], size: int) -> str:
    """Why a response with ``status`` and ``headers`` cannot be spliced as ``size`` bytes, or ""."""
    if status != 200:
        return f"status {status}"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked transfer encoding"
    if headers.get("content-encoding", "identity").lower() not in ("", "identity"):
        return "a content encoding"
    length = headers.get("content-length", "")
    if not length.isdigit():
        return "no Content-Length"
    if int(length) != size:
        return f"Content-Length {length} where the manifest says {size}"
    return ""


def pipe_size(fd: int, want: int = PIPE_BYTES) -> int:
    """Grow pipe ``fd`` towards ``want`` bytes (down to pipe-max-size where the kernel refuses more); its size."""
    for size in (want, _max_pipe()):
        try:
            return int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size))
        except OSError:
            continue
    return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


def _max_pipe() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return 2**20


def _move(sock: socket.socket, fd: int, size: int, read_s: float, where: str) -> None:
    """``size`` body bytes from ``sock`` into ``fd`` through a pipe, by splice; each wait bounded by ``read_s``.

    The pipe is filled to its size before it is emptied into the file. A pipe that takes no
    more while it holds fewer bytes than its size (the network's pieces, often short of a page,
    take its slots) is emptied only up to a multiple of :data:`WRITE_ALIGN` in the file, the
    rest kept for the next write: the page cache sizes a file's folios by its writes' lengths
    and alignment, and writes ending anywhere would leave it in 4-32 KiB folios.
    """
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        cap = pipe_size(w)
        sock.setblocking(False)
        src = sock.fileno()
        done = held = 0  # bytes in the file; bytes in the pipe
        while done < size:
            want = min(cap - held, size - done - held)
            if want > 0:
                try:
                    n = os.splice(src, w, want, flags=os.SPLICE_F_NONBLOCK | os.SPLICE_F_MOVE)
                except BlockingIOError:
                    if _readable(src, 0):  # data waits, the pipe takes no more: empty it
                        n = -1
                    elif _readable(src, read_s):
                        continue
                    else:
                        raise TimeoutError(
                            f"no data for {read_s:g} s from the server after {done + held} of {size} bytes of {where}"
                        ) from None
                if n == 0:
                    raise ConnectionError(
                        f"the server closed the connection after {done + held} of {size} bytes of {where}"
                    )
                if n > 0:
                    held += n
                    if held < cap and done + held < size:
                        continue
            k = held
            if held < cap and done + held < size:  # a pipe short of full: write up to an aligned end
                k = (done + held) // WRITE_ALIGN * WRITE_ALIGN - done
                if k <= 0:
                    k = held
            while k:
                m = os.splice(r, fd, k, flags=os.SPLICE_F_MOVE)
                k -= m
                held -= m
                done += m
    finally:
        os.close(r)
        os.close(w)


def _readable(fd: int, timeout_s: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(int(timeout_s * 1000)))


def hash_file(fd: int, size: int, seen: Callable[[memoryview], None]) -> None:
    """Hand the ``size`` bytes of file ``fd`` to ``seen`` in pieces, read through a read-only map (no copy)."""
    if size == 0:
        return
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mem:
        view = memoryview(mem)
        try:
            for start in range(0, size, HASH_PIECE):
                seen(view[start : start + HASH_PIECE])
        finally:
            view.release()


__all__ = [
    "AUTO_MAX_STORE",
    "SPLICE_ENV",
    "Declined",
    "Splicer",
    "hash_file",
    "mode",
    "pipe_size",
    "size_reason",
    "splice_reason",
]
