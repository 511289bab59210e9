"""A fake HashiCorp Vault transit engine (AES-GCM under a key it never shows, `vault:v1:` texts) for
the hcvault driver's tests: mounted as a `requests` adapter on hvac's session, or served on loopback
HTTP so Spark's Python workers reach it too. It records each request it answers.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from requests.adapters import BaseAdapter

TOKEN = "hvs.fake-root-token-do-not-leak"
APPROLE_TOKEN = "hvs.approle-login-token"


@dataclass
class Seen:
    """One request the fake answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeVault:
    """Transit keys by (mount, name); tokens it accepts; AppRole credentials it logs in."""

    role_id: str = "role-1"
    secret_id: str = "approle-secret-do-not-leak"
    keys: dict[tuple[str, str], bytes] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(
        self, method: str, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, Any]:
        """The status and JSON body Vault would answer."""
        with self.lock:
            self.seen.append(Seen(method, path, headers, body))
        if path == "/v1/auth/approle/login":
            if (body.get("role_id"), body.get("secret_id")) != (self.role_id, self.secret_id):
                return 400, {"errors": ["invalid role or secret ID"]}
            return 200, {"auth": {"client_token": APPROLE_TOKEN}}
        if headers.get("x-vault-token") not in (TOKEN, APPROLE_TOKEN):
            return 403, {"errors": ["permission denied"]}
        mount, _, rest = path.removeprefix("/v1/").partition("/encrypt/")
        if rest:
            return 200, {"data": {"ciphertext": self._encrypt(mount, rest, body)}}
        mount, _, rest = path.removeprefix("/v1/").partition("/decrypt/")
        if rest:
            return self._decrypt(mount, rest, body)
        return 404, {"errors": [f"no handler for {path}"]}

    def _key(self, mount: str, name: str) -> AESGCM:
        with self.lock:
            return AESGCM(self.keys.setdefault((mount, name), AESGCM.generate_key(256)))

    def _encrypt(self, mount: str, name: str, body: dict[str, Any]) -> str:
        nonce = os.urandom(12)
        sealed = nonce + self._key(mount, name).encrypt(nonce, base64.b64decode(body["plaintext"]), None)
        return "vault:v1:" + base64.b64encode(sealed).decode()

    def _decrypt(self, mount: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        text = str(body.get("ciphertext", ""))
        if not text.startswith("vault:v1:"):
            return 400, {"errors": ["invalid ciphertext: no prefix"]}
        sealed = base64.b64decode(text.removeprefix("vault:v1:"))
        try:
            plaintext = self._key(mount, name).decrypt(sealed[:12], sealed[12:], None)
        except Exception:
            return 400, {"errors": ["cipher: message authentication failed"]}
        return 200, {"data": {"plaintext": base64.b64encode(plaintext).decode()}}


class VaultAdapter(BaseAdapter):
    """A `requests` transport answering from a FakeVault, for a session hvac sends through."""

    def __init__(self, vault: FakeVault) -> None:
        super().__init__()
        self.vault = vault

    def send(self, request: Any, **kwargs: Any) -> requests.Response:
        url = requests.utils.urlparse(request.url)
        body = json.loads(request.body) if request.body else {}
        headers = {key.lower(): value for key, value in request.headers.items()}
        status, answer = self.vault.handle(request.method, url.path, headers, body)
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(answer).encode()
        response.headers["Content-Type"] = "application/json"
        response.url = request.url
        response.request = request
        return response

    def close(self) -> None:
        """Nothing to release."""


@contextmanager
def serving(vault: FakeVault) -> Iterator[str]:
    """The fake served on a loopback port for the block: yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {key.lower(): value for key, value in self.headers.items()}
            status, answer = vault.handle("POST", self.path, headers, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads `vault.seen`."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
