"""A loopback Confluent-compatible Schema Registry REST server over any `Registry`, for tests.

It speaks the REST shapes and JSON error bodies of Confluent Schema Registry, records every
request (method, path, query, headers, body), can require basic or bearer auth, serves HTTPS
(optionally mutual TLS) with throwaway certificates, plays a queue of injected faults (canned
replies, stalls, hang-ups, answers trickled a byte at a time, endless bodies) before behaving
normally again, and can answer a path with a fixed reply every time (`override`).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import re
import socket
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from contracts.errors import ContractError, RegistryError
from contracts.model import Schema
from contracts.registry import Registry
from contracts.registry.dek import DekRegistry

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class Reply:
    """A fault: answer with this status and raw body instead of asking the registry."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Stall:
    """A fault: sleep this long (longer than the client's read timeout, say), then serve normally."""

    seconds: float


@dataclass(frozen=True)
class Hangup:
    """A fault: close the connection without answering."""


@dataclass(frozen=True)
class Trickle:
    """A fault: send the real answer one byte every `interval` seconds, its body only or (with
    `headers`) its status line and headers too, so no single read ever waits long."""

    interval: float
    headers: bool = False


@dataclass(frozen=True)
class Flood:
    """A fault: a 200 answer whose body is `size` bytes of JSON whitespace, sent as fast as the
    client reads; with `declared` its Content-Length says so, else it runs until the connection
    closes. `sent` counts the bytes that left, to show a client stopped reading early."""

    size: int
    declared: bool = True
    sent: list[int] = field(default_factory=list, compare=False)


Fault = Reply | Stall | Hangup | Trickle | Flood


def json_reply(status: int, payload: Any) -> Reply:
    """Any JSON answer, e.g. a version whose contract the client must reject."""
    return Reply(status, json.dumps(payload).encode(), (("Content-Type", CONTENT_TYPE),))


def error_reply(status: int, error_code: int, message: str, *headers: tuple[str, str]) -> Reply:
    """A Confluent error body, e.g. error_reply(503, 50003, "Error while forwarding the request")."""
    reply = json_reply(status, {"error_code": error_code, "message": message})
    return Reply(status, reply.body, reply.headers + headers)


def malformed_reply(status: int = 200) -> Reply:
    """A body that is not JSON, as a proxy's HTML error page would be."""
    return Reply(status, b"<html><body>Bad Gateway</body></html>", (("Content-Type", "text/html"),))


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


class _ApiError(Exception):
    """A REST error answer: HTTP status plus Confluent's error_code and message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass
class RegistryServer:
    """The server's state: the registry behind it, its auth, fault queue and request log."""

    registry: Registry
    basic_auth: tuple[str, str] | None = None
    bearer_token: str | None = None
    tls: ssl.SSLContext | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    _faults: deque[Fault] = field(default_factory=deque)
    _overrides: dict[str, Reply] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _http: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._http is not None, "the server is not running"
        host, port = self._http.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def inject(self, *faults: Fault) -> None:
        """Play these faults, one per request, on the next requests; then behave normally."""
        with self._lock:
            self._faults.extend(faults)

    def override(self, path: str, reply: Reply) -> None:
        """Answer every request for `path` with `reply` (after any queued fault), e.g. a version
        answered for another version than the one asked for."""
        with self._lock:
            self._overrides[path] = reply

    def count(self, method: str | None = None, path: str | None = None) -> int:
        """How many requests arrived (optionally only with this method and/or path)."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            )

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    def start(self) -> None:
        self._http = _QuietServer(("127.0.0.1", 0), _Handler)
        self._http.daemon_threads = True
        if self.tls is not None:
            self._http.socket = self.tls.wrap_socket(self._http.socket, server_side=True)
        self._http.app = self  # type: ignore[attr-defined]
        # A short poll interval makes shutdown (once per test) take milliseconds instead of 0.5 s.
        serve = threading.Thread(target=self._http.serve_forever, args=(0.01,), name="registry-server")
        serve.daemon = True
        serve.start()

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def _arrived(self, request: RecordedRequest) -> Fault | None:
        """Log a request and hand out the next fault, if any is queued, else its path's override."""
        with self._lock:
            self.requests.append(request)
            return self._faults.popleft() if self._faults else self._overrides.get(request.path)

    def _authorized(self, headers: dict[str, str]) -> bool:
        given = headers.get("authorization", "")
        if self.basic_auth is not None:
            expected = base64.b64encode(":".join(self.basic_auth).encode()).decode()
            return given == f"Basic {expected}"
        if self.bearer_token is not None:
            return given == f"Bearer {self.bearer_token}"
        return True


@contextmanager
def running_registry(
    registry: Registry,
    *,
    basic_auth: tuple[str, str] | None = None,
    bearer_token: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> Iterator[RegistryServer]:
    """Serve `registry` on 127.0.0.1 (a free port; HTTPS given `tls`) for the block; yields the server."""
    server = RegistryServer(registry, basic_auth=basic_auth, bearer_token=bearer_token, tls=tls)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def unused_url() -> str:
    """A loopback URL nothing listens on, so connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""

    ca: str
    server: tuple[str, str]
    client: tuple[str, str]

    def server_context(self, *, require_client_cert: bool = False) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*self.server)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.ca)
        return context


def make_tls_files(directory: Path) -> TlsFiles:
    """A throwaway CA and the certificates it signed, written under `directory`."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = _certificate(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)

    def issue(name: str, extension: x509.ExtensionType) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = _certificate(subject, key.public_key(), ca_name, ca_key, extension=extension)
        return _write(directory / f"{name}.crt", cert), _write_key(directory / f"{name}.key", key)

    return TlsFiles(
        ca=_write(directory / "ca.crt", ca),
        server=issue(
            "server", x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        ),
        client=issue("client", x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])),
    )


def _certificate(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    extension: x509.ExtensionType | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if extension is not None:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate) -> str:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> str:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(path)


class _QuietServer(ThreadingHTTPServer):
    """Says nothing when a client hangs up mid-connection (a client refusing an answer does)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "registry-server"
    # Buffered, so headers and body leave in one segment (no 40 ms Nagle/delayed-ACK stall).
    wbufsize = 64 * 1024

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `RegistryServer.requests` instead of stderr."""

    def _handle(self) -> None:
        app: RegistryServer = self.server.app  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request = RecordedRequest(
            method=self.command,
            path=url.path,
            query=parse_qs(url.query),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=self.rfile.read(length) if length else b"",
        )
        fault = app._arrived(request)
        if isinstance(fault, Hangup):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(fault, Reply):
            self._send(fault.status, fault.body, fault.headers)
            return
        if isinstance(fault, Flood):
            self._flood(fault)
            return
        if isinstance(fault, Stall):
            time.sleep(fault.seconds)
        status, answer, headers = self._answer(app, request)
        body = json.dumps(answer).encode()
        headers = (("Content-Type", CONTENT_TYPE), *headers)
        if isinstance(fault, Trickle):
            self._trickle(status, body, headers, fault)
        else:
            self._send(status, body, headers)

    def _answer(
        self, app: RegistryServer, request: RecordedRequest
    ) -> tuple[int, Any, tuple[tuple[str, str], ...]]:
        """What the registry answers: status, JSON payload, extra headers."""
        if not app._authorized(request.headers):
            return 401, {"error_code": 401, "message": "Unauthorized"}, (("WWW-Authenticate", "Basic"),)
        try:
            status, answer = 200, _route(app.registry, request)
        except _ApiError as error:
            status, answer = error.status, {"error_code": error.error_code, "message": error.message}
        except RegistryError as error:
            status, answer = _status_of(error), {"error_code": _code_of(error), "message": error.reason}
        except ContractError as error:
            status, answer = 422, {"error_code": 42201, "message": str(error)}
        except Exception as error:  # the registry's own failure: Confluent answers 500 / 50001
            status, answer = 500, {"error_code": 50001, "message": f"{type(error).__name__}: {error}"}
        return status, answer, ()

    def _trickle(
        self, status: int, body: bytes, headers: tuple[tuple[str, str], ...], fault: Trickle
    ) -> None:
        head = f"HTTP/1.1 {status} {self.responses[status][0]}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers)
        head += f"Content-Length: {len(body)}\r\n\r\n"
        slow = head.encode() + body if fault.headers else body
        try:
            if not fault.headers:
                self.wfile.write(head.encode())
            for byte in slow:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(fault.interval)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should
        self.close_connection = True

    def _flood(self, fault: Flood) -> None:
        length = ("Content-Length", str(fault.size)) if fault.declared else ("Connection", "close")
        chunk = b" " * 65536
        sent = 0
        try:
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header(*length)
            self.end_headers()
            while sent < fault.size:
                self.wfile.write(chunk[: fault.size - sent])
                sent += min(len(chunk), fault.size - sent)
        except (BrokenPipeError, ConnectionResetError):
            pass
        fault.sent.append(sent)
        self.close_connection = True

    def _send(self, status: int, body: bytes, headers: tuple[tuple[str, str], ...]) -> None:
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a read timeout after a Stall); nobody is left to answer.
            self.close_connection = True


def _status_of(error: RegistryError) -> int:
    """The HTTP status of a registry error: Confluent's 5-digit codes start with it (40401 → 404)."""
    if error.status is not None:
        return error.status
    code = error.error_code or 50001
    return code // 100 if code >= 10000 else code


def _code_of(error: RegistryError) -> int:
    return error.error_code if error.error_code is not None else _status_of(error)


# -- routes ------------------------------------------------------------------------------------

Route = Callable[[Registry, RecordedRequest, list[str]], Any]
_ROUTES: list[tuple[str, re.Pattern[str], Route]] = []


def _route_for(method: str, pattern: str) -> Callable[[Route], Route]:
    """Register a handler for METHOD and a path pattern whose groups are percent-encoded segments."""

    def register(handler: Route) -> Route:
        _ROUTES.append((method, re.compile(f"^{pattern}$"), handler))
        return handler

    return register


def _route(registry: Registry, request: RecordedRequest) -> Any:
    allowed = False
    for method, pattern, handler in _ROUTES:
        match = pattern.match(request.path)
        if match is None:
            continue
        if method == request.method:
            return handler(registry, request, [unquote(group) for group in match.groups()])
        allowed = True
    if allowed:
        raise _ApiError(405, 405, "HTTP 405 Method Not Allowed")
    raise _ApiError(404, 404, "HTTP 404 Not Found")


_SEGMENT = "([^/]+)"


@_route_for("GET", "/subjects")
def _subjects(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return registry.get_subjects()


@_route_for("GET", f"/subjects/{_SEGMENT}/versions")
def _versions(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return registry.get_versions(args[0])


@_route_for("POST", f"/subjects/{_SEGMENT}/versions")
def _register(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    schema = _schema_body(request)
    return {"id": registry.register_schema(args[0], schema, normalize=_flag(request, "normalize"))}


@_route_for("GET", f"/subjects/{_SEGMENT}/versions/{_SEGMENT}")
def _version(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return registry.get_version(args[0], _version_arg(args[1])).to_dict()


@_route_for("GET", f"/subjects/{_SEGMENT}/metadata")
def _latest_with_metadata(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    keys, values = request.query.get("key", []), request.query.get("value", [])
    if len(keys) != len(values):
        raise _ApiError(422, 42202, "Every metadata key needs one value")
    return registry.get_latest_with_metadata(args[0], dict(zip(keys, values, strict=True))).to_dict()


@_route_for("POST", f"/subjects/{_SEGMENT}")
def _lookup(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return registry.lookup_schema(args[0], _schema_body(request)).to_dict()


@_route_for("DELETE", f"/subjects/{_SEGMENT}")
def _delete(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return registry.delete_subject(args[0], permanent=_flag(request, "permanent"))


@_route_for("DELETE", f"/subjects/{_SEGMENT}/versions/{_SEGMENT}")
def _delete_version(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return registry.delete_version(args[0], args[1], permanent=_flag(request, "permanent"))


@_route_for("GET", f"/schemas/ids/{_SEGMENT}")
def _schema_by_id(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    if not args[0].isdigit():
        raise _ApiError(404, 404, "HTTP 404 Not Found")
    return registry.get_schema(int(args[0])).to_dict()


@_route_for("GET", f"/schemas/guids/{_SEGMENT}")
def _schema_by_guid(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    """As Confluent answers it: the schema with its GUID, no id, subject or version."""
    return {"guid": args[0], **registry.get_schema_by_guid(args[0]).to_dict()}


@_route_for("GET", "/config")
def _global_config(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    return _config_answer(registry.get_config())


@_route_for("GET", f"/config/{_SEGMENT}")
def _subject_config(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    if request.query.get("defaultToGlobal", ["false"])[0] == "true":
        return _config_answer(registry.get_config(args[0]))
    own = registry.get_config(args[0], default_to_global=False)
    if not own:
        message = f"Subject '{args[0]}' does not have subject-level compatibility configured"
        raise _ApiError(404, 40408, message)
    return _config_answer(own)


@_route_for("PUT", "/config")
def _set_global_config(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    body = _json_body(request)
    registry.set_config(**body)
    return body


@_route_for("PUT", f"/config/{_SEGMENT}")
def _set_subject_config(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    body = _json_body(request)
    registry.set_config(args[0], **body)
    return body


@_route_for("POST", f"/compatibility/subjects/{_SEGMENT}/versions/{_SEGMENT}")
def _compatibility(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    schema = _schema_body(request)
    return {"is_compatible": registry.test_compatibility(args[0], schema, _version_arg(args[1]))}


@_route_for("POST", "/dek-registry/v1/keks")
def _register_kek(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    body = _json_body(request)
    kek = _deks(registry).register_kek(
        body.get("name", ""),
        body.get("kmsType", ""),
        body.get("kmsKeyId", ""),
        bool(body.get("shared", False)),
        body.get("kmsProps"),
        body.get("doc"),
        request.query.get("context", [None])[-1],
    )
    return kek.to_dict()


@_route_for("GET", f"/dek-registry/v1/keks/{_SEGMENT}")
def _get_kek(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    context = request.query.get("context", [None])[-1]
    return _deks(registry).get_kek(args[0], _flag(request, "deleted"), context).to_dict()


@_route_for("POST", f"/dek-registry/v1/keks/{_SEGMENT}/deks/{_SEGMENT}")
def _register_dek(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    body = _json_body(request)
    if body.get("subject") != args[1]:
        raise _ApiError(422, 42201, "the body's subject differs from the path's")
    dek = _deks(registry).register_dek(
        args[0],
        args[1],
        body.get("encryptedKeyMaterial"),
        body.get("algorithm", "AES256_GCM"),
        body.get("version", 1),
    )
    return dek.to_dict()


@_route_for("GET", f"/dek-registry/v1/keks/{_SEGMENT}/deks/{_SEGMENT}/versions/{_SEGMENT}")
def _get_dek(registry: Registry, request: RecordedRequest, args: list[str]) -> Any:
    version = -1 if args[2] in ("latest", "-1") else int(args[2]) if args[2].isdigit() else 0
    if version == 0:
        raise _ApiError(422, 42202, f"The specified version '{args[2]}' is not a valid version id.")
    algorithm = request.query.get("algorithm", ["AES256_GCM"])[-1]
    return _deks(registry).get_dek(args[0], args[1], algorithm, version, _flag(request, "deleted")).to_dict()


def _deks(registry: Registry) -> DekRegistry:
    if not isinstance(registry, DekRegistry):
        raise _ApiError(404, 404, "HTTP 404 Not Found")
    return registry


def _config_answer(config: dict[str, Any]) -> dict[str, Any]:
    """GET /config names the level `compatibilityLevel`; PUT takes and echoes `compatibility`."""
    answer = dict(config)
    if "compatibility" in answer:
        answer["compatibilityLevel"] = answer.pop("compatibility")
    return answer


def _json_body(request: RecordedRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"null")
    except ValueError as error:
        raise _ApiError(400, 400, f"Unrecognized JSON body: {error}") from error
    if not isinstance(body, dict):
        raise _ApiError(422, 422, "The request body must be a JSON object")
    return body


def _schema_body(request: RecordedRequest) -> Schema:
    return Schema.from_dict(_json_body(request))


def _flag(request: RecordedRequest, name: str) -> bool:
    return request.query.get(name, ["false"])[-1].lower() == "true"


def _version_arg(text: str) -> int | str:
    """A version path segment: "latest", -1 (also latest) or 1..2^31-1; else Confluent's 42202."""
    if text in ("latest", "-1"):
        return "latest"
    if text.isdigit() and 1 <= int(text) <= 2**31 - 1:
        return int(text)
    raise _ApiError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )
