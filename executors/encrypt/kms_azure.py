"""The `azure-kms` driver: an RSA key in Azure Key Vault wraps and unwraps DEKs through
azure-keyvault-keys and azure-identity (the `azure` extra).

As the reference's AzureKmsDriver: the key id is the key's identifier
(`https://<vault>/keys/<name>/<version>`, the version optional, optionally as the key URL
`azure-kms://<identifier>`); the credential is a client secret of the config's `tenant.id`,
`client.id` and `client.secret`, else azure-identity's DefaultAzureCredential. A
CryptographyClient of the key encrypts the DEK with RSA-OAEP-256 and decrypts it. With
`encrypt.azure.key.version.save` true, a wrapped DEK is `azure:v1:<32-hex key version>:` then the
RSA ciphertext (the version resolved from the vault when the key id has none), so it still unwraps
after the key rotates; unwrapping reads that prefix whatever the setting.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlparse

from executors.encrypt.kms import Aead, KmsError, import_sdk, key_path

KMS_TYPE = "azure-kms"
TENANT_ID = "tenant.id"
CLIENT_ID = "client.id"
CLIENT_SECRET = "client.secret"
KEY_VERSION_SAVE = "encrypt.azure.key.version.save"
ALGORITHM = "RSA-OAEP-256"
_PREFIX = b"azure:v1:"
_VERSION_LENGTH = 32
_HEADER_LENGTH = len(_PREFIX) + _VERSION_LENGTH + 1
_log = logging.getLogger(__name__)


class KeyId(NamedTuple):
    """A Key Vault key identifier's parts."""

    vault_url: str
    name: str
    version: str | None

    def url(self, version: str | None) -> str:
        return f"{self.vault_url}/keys/{self.name}" + (f"/{version}" if version else "")


class AzureKmsDriver:
    """The `azure-kms` KMS type. `credential` (an azure-core TokenCredential) replaces the one the
    config makes; `client_options` go to the Key Vault clients (azure-core's retry, proxies,
    transport, ...)."""

    kms_type = KMS_TYPE

    def __init__(self, credential: Any = None, **client_options: Any) -> None:
        self._credential = credential
        self._client_options = client_options

    def __repr__(self) -> str:
        return "AzureKmsDriver()"

    def new_aead(self, config: Mapping[str, str], kms_key_id: str) -> Aead:
        key = parse_key_id(key_path(kms_key_id, KMS_TYPE), kms_key_id)
        crypto = import_sdk("azure.keyvault.keys.crypto", KMS_TYPE, "azure")
        credential = self._credential or _credential(config)
        save_version = str(config.get(KEY_VERSION_SAVE, "")).lower() == "true"
        if key.version is None and not save_version:
            _log.warning(
                "azure-kms key %r has no version and %s is not true: DEKs it wraps may not unwrap "
                "once the key rotates",
                key.url(None),
                KEY_VERSION_SAVE,
            )

        def client(version: str | None) -> Any:
            return crypto.CryptographyClient(key.url(version), credential, **self._client_options)

        def latest_version() -> str:
            keys = import_sdk("azure.keyvault.keys", KMS_TYPE, "azure")
            try:
                found = keys.KeyClient(key.vault_url, credential, **self._client_options).get_key(key.name)
            except Exception as e:
                raise KmsError(f"azure-kms key {key.url(None)!r}: cannot resolve its version: {e}") from e
            return found.properties.version or ""

        return AzureKmsAead(key, client, latest_version if save_version else None)


class AzureKmsAead:
    """Wraps and unwraps with one Key Vault key: RSA-OAEP-256 encrypt and decrypt."""

    def __init__(self, key: KeyId, client: Any, latest_version: Any = None) -> None:
        self._key = key
        self._client = client
        self._latest_version = latest_version

    def __repr__(self) -> str:
        return f"AzureKmsAead({self._key.url(self._key.version)!r})"

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        if self._latest_version is None:
            return self._call("encrypt", self._key.version, plaintext).ciphertext
        version = self._key.version or self._latest_version()
        if not _valid_version(version):
            raise KmsError(
                f"azure-kms key {self._key.url(None)!r}: version {version!r} is not "
                f"{_VERSION_LENGTH} hex digits, so {KEY_VERSION_SAVE} cannot keep it"
            )
        ciphertext = self._call("encrypt", version, plaintext).ciphertext
        return _PREFIX + version.encode("ascii") + b":" + ciphertext

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        version, wrapped = self._key.version, ciphertext
        if ciphertext.startswith(_PREFIX) and ciphertext[_HEADER_LENGTH - 1 : _HEADER_LENGTH] == b":":
            version = ciphertext[len(_PREFIX) : _HEADER_LENGTH - 1].decode("ascii", errors="replace")
            if not _valid_version(version):
                raise KmsError(f"azure-kms key {self._key.url(None)!r}: the DEK names an invalid version")
            wrapped = ciphertext[_HEADER_LENGTH:]
        return self._call("decrypt", version, wrapped).plaintext

    def _call(self, operation: str, version: str | None, data: bytes) -> Any:
        crypto = import_sdk("azure.keyvault.keys.crypto", KMS_TYPE, "azure")
        try:
            return getattr(self._client(version), operation)(crypto.EncryptionAlgorithm.rsa_oaep_256, data)
        except Exception as e:
            raise KmsError(f"azure-kms key {self._key.url(version)!r}: {operation} failed: {e}") from e


def parse_key_id(identifier: str, kms_key_id: str) -> KeyId:
    """The vault, name and version of `https://<vault>/keys/<name>[/<version>]`."""
    parsed = urlparse(identifier)
    segments = [segment for segment in parsed.path.split("/") if segment]
    if not parsed.scheme or not parsed.netloc or len(segments) not in (2, 3) or segments[0] != "keys":
        raise KmsError(
            f"azure-kms key id {kms_key_id!r} is not a Key Vault key identifier "
            "(https://<vault>/keys/<name>/<version>)"
        )
    version = segments[2] if len(segments) == 3 else None
    return KeyId(f"{parsed.scheme}://{parsed.netloc}", segments[1], version)


def _credential(config: Mapping[str, str]) -> Any:
    identity = import_sdk("azure.identity", KMS_TYPE, "azure")
    tenant, client, secret = config.get(TENANT_ID), config.get(CLIENT_ID), config.get(CLIENT_SECRET)
    if tenant and client and secret:
        return identity.ClientSecretCredential(tenant, client, secret)
    return identity.DefaultAzureCredential()


def _valid_version(version: str) -> bool:
    return len(version) == _VERSION_LENGTH and all(c in string.hexdigits for c in version)
