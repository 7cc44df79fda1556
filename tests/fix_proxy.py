"""A TCP forwarder a test can switch off: a remote's outage, with real sockets.

``proxy = outage_proxy(target_url)`` listens on a free 127.0.0.1 port and forwards every
connection to the target. ``proxy.down()`` closes the listening socket and cuts every
connection in flight, so a client sees what an outage looks like (connection refused,
or a connection reset mid-request); ``proxy.up()`` listens on the same port again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest

CHUNK = 65536  # bytes forwarded per read


class OutageProxy:
    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port: int = probe.getsockname()[1]
        probe.close()
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Nothing listens any more, and every forwarded connection is cut."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # down() closed it
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # went down meanwhile
                    _close(client)
                    _close(upstream)
                    return
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open -= {source, sink}
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@pytest.fixture
def outage_proxy() -> Iterator[Callable[[str], OutageProxy]]:
    """Make forwarders to a URL; every one is switched off after the test."""
    made: list[OutageProxy] = []

    def make(target: str) -> OutageProxy:
        proxy = OutageProxy(target)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.down()
