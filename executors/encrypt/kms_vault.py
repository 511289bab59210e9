"""The `hcvault` driver: a HashiCorp Vault transit key wraps and unwraps DEKs through hvac (the
`vault` extra).

As the reference's HcVaultKmsDriver: the key id is the key's URL, `https://<host>[:port]/<mount>/
keys/<name>` (e.g. `.../transit/keys/orders`; optionally as the key URL `hcvault://<url>`); the
token is the config's `token.id` (else $VAULT_TOKEN), the namespace `namespace` (else
$VAULT_NAMESPACE), an AppRole login `approle.role.id` and `approle.secret.id` (else
$VAULT_APPROLE_ROLE_ID, $VAULT_APPROLE_SECRET_ID); TLS verifies against `ssl.ca.location` (else
$VAULT_CACERT, else the system's CAs) with the client certificate `ssl.certificate.location` and
key `ssl.key.location` (else $VAULT_CLIENT_CERT, $VAULT_CLIENT_KEY). Wrapping is transit encrypt of
the base64 DEK with an empty context, unwrapping transit decrypt of the `vault:v<n>:...` text, as
Tink sends them.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlparse

from executors.encrypt.kms import Aead, KmsError, import_sdk, key_path

KMS_TYPE = "hcvault"
TOKEN_ID = "token.id"
NAMESPACE = "namespace"
APPROLE_ROLE_ID = "approle.role.id"
APPROLE_SECRET_ID = "approle.secret.id"
SSL_CA_LOCATION = "ssl.ca.location"
SSL_CERTIFICATE_LOCATION = "ssl.certificate.location"
SSL_KEY_LOCATION = "ssl.key.location"
_PATH = re.compile(r"/?([^/]+(?:/[^/]+)*)/keys/([^/]+)")


class VaultKmsDriver:
    """The `hcvault` KMS type."""

    kms_type = KMS_TYPE

    def __repr__(self) -> str:
        return "VaultKmsDriver()"

    def new_aead(self, config: Mapping[str, str], kms_key_id: str) -> Aead:
        url = urlparse(key_path(kms_key_id, KMS_TYPE))
        paths = _PATH.fullmatch(quote(url.path))
        if url.scheme not in ("http", "https") or not url.netloc or not paths:
            raise KmsError(
                f"hcvault key id {kms_key_id!r} is not a Vault transit key URL "
                "(https://<host>[:port]/<mount>/keys/<name>)"
            )
        hvac = import_sdk("hvac", KMS_TYPE, "vault")
        client = hvac.Client(
            url=f"{url.scheme}://{url.netloc}",
            token=_setting(config, TOKEN_ID, "VAULT_TOKEN"),
            namespace=_setting(config, NAMESPACE, "VAULT_NAMESPACE"),
            verify=_setting(config, SSL_CA_LOCATION, "VAULT_CACERT") or True,
            cert=_cert(config, kms_key_id),
        )
        role_id = _setting(config, APPROLE_ROLE_ID, "VAULT_APPROLE_ROLE_ID")
        secret_id = _setting(config, APPROLE_SECRET_ID, "VAULT_APPROLE_SECRET_ID")
        if role_id and secret_id:
            try:
                client.auth.approle.login(role_id=role_id, secret_id=secret_id)
            except Exception as e:
                raise KmsError(f"hcvault key id {kms_key_id!r}: AppRole login failed: {e}") from e
        mount, name = paths.groups()
        return VaultKmsAead(client, mount, name, f"{url.scheme}://{url.netloc}{url.path}")


class VaultKmsAead:
    """Wraps and unwraps with one transit key of one Vault."""

    def __init__(self, client: Any, mount: str, name: str, key_url: str) -> None:
        self._client = client
        self._mount = mount
        self._name = name
        self._key_url = key_url

    def __repr__(self) -> str:
        return f"VaultKmsAead({self._key_url!r})"

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        self._no_associated_data(associated_data)
        try:
            response = self._client.secrets.transit.encrypt_data(
                name=self._name,
                plaintext=base64.b64encode(plaintext).decode("ascii"),
                context="",
                mount_point=self._mount,
            )
        except Exception as e:
            raise KmsError(f"hcvault key {self._key_url!r}: encrypt failed: {e}") from e
        return str(response["data"]["ciphertext"]).encode("utf-8")

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        self._no_associated_data(associated_data)
        try:
            response = self._client.secrets.transit.decrypt_data(
                name=self._name, ciphertext=ciphertext.decode("utf-8"), context="", mount_point=self._mount
            )
        except Exception as e:
            raise KmsError(f"hcvault key {self._key_url!r}: decrypt failed: {e}") from e
        return base64.b64decode(response["data"]["plaintext"])

    def _no_associated_data(self, associated_data: bytes) -> None:
        if associated_data:
            raise KmsError(f"hcvault key {self._key_url!r}: transit takes no associated data")


def _setting(config: Mapping[str, str], key: str, environment: str) -> str | None:
    """A config value, else the environment's (the reference's order), else None."""
    return config.get(key) or os.environ.get(environment) or None


def _cert(config: Mapping[str, str], kms_key_id: str) -> str | tuple[str, str] | None:
    certificate = _setting(config, SSL_CERTIFICATE_LOCATION, "VAULT_CLIENT_CERT")
    key = _setting(config, SSL_KEY_LOCATION, "VAULT_CLIENT_KEY")
    if key and not certificate:
        raise KmsError(f"hcvault key id {kms_key_id!r}: {SSL_KEY_LOCATION} needs {SSL_CERTIFICATE_LOCATION}")
    return (certificate, key) if certificate and key else certificate
