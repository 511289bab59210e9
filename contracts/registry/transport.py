"""An httpx transport whose every network wait ends at the calling thread's deadline.

httpx's timeouts bound each socket operation, not a request: a server sending one byte every
quarter second never trips a one-second read timeout and can hold a call for as long as it likes.
Here every connect, TLS handshake, read and write waits at most until the deadline that
`deadline()` set for the current thread, then fails with httpx's timeout for that step, so one
bound covers a whole call, headers and body included. Built on httpcore's public pool and
network-backend interfaces; proxies come from the environment as httpx would take them.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

from contracts.errors import RegistryError

_thread = threading.local()

# httpcore's errors as the httpx ones callers catch (most specific first).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def deadline(at: float) -> Iterator[None]:
    """Bound every network wait of this thread's requests until `at` (a `time.monotonic()` value)."""
    previous = getattr(_thread, "deadline", None)
    _thread.deadline = at
    try:
        yield
    finally:
        _thread.deadline = previous


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout`, shortened to what is left before the thread's deadline (raising once none is)."""
    at = getattr(_thread, "deadline", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A connection whose reads and writes never wait past the deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's own socket backend, each connection wrapped in a `_Stream`."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.BaseTransport):
    """Requests over a connection pool (through `proxy`, when given) that honours the deadline."""

    def __init__(self, tls: ssl.SSLContext, proxy: httpx.Proxy | None = None) -> None:
        if proxy is None:
            self._pool: httpcore.ConnectionPool = httpcore.ConnectionPool(
                ssl_context=tls, network_backend=_Backend()
            )
        else:
            self._pool = httpcore.HTTPProxy(
                proxy_url=_core_url(proxy.url),
                proxy_auth=proxy.raw_auth,
                proxy_headers=proxy.headers.raw,
                ssl_context=tls,
                network_backend=_Backend(),
            )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        core = httpcore.Request(
            method=request.method,
            url=_core_url(request.url),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]  # a sync byte stream: iterable bytes
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = self._pool.handle_request(core)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),  # type: ignore[arg-type]  # httpcore's sync stream
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _Body(httpx.SyncByteStream):
    """A response body read from the pool, its errors raised as httpx's."""

    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            with _as_httpx_errors():
                close()


def environment_proxy(url: str) -> httpx.Proxy | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY)."""
    parts = httpx.URL(url)
    if urllib.request.proxy_bypass(parts.host):
        return None
    proxies = urllib.request.getproxies()
    found = proxies.get(parts.scheme) or proxies.get("all")
    if not found:
        return None
    proxy = httpx.Proxy(found)
    if proxy.url.scheme not in ("http", "https"):
        raise RegistryError(
            f"the environment names a {proxy.url.scheme} proxy for {parts.scheme} URLs; only http(s) proxies"
            " are supported (set NO_PROXY to the registry's host to connect directly)"
        )
    return proxy


def _core_url(url: httpx.URL) -> httpcore.URL:
    return httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as error:
        mapped = next((to for core, to in _ERRORS if isinstance(error, core)), None)
        if mapped is None:
            raise
        raise mapped(str(error)) from error
