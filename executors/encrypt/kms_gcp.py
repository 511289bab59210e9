"""The `gcp-kms` driver: a KEK in Google Cloud KMS wraps and unwraps DEKs through google-cloud-kms
(the `gcp` extra).

As the reference's GcpKmsDriver: the key id is the CryptoKey's resource name
(`projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>`, optionally as the key URL
`gcp-kms://<name>`; a CryptoKeyVersion name wraps but cannot unwrap); the credentials are the
service account of the config's `client.id`, `client.email`, `private.key.id` and `private.key`
(`account.type` must be `service_account`, `token.uri` defaults to Google's), else the
application default credentials. Wrapping is the KMS Encrypt call with the key name, the DEK and the
associated data, unwrapping Decrypt, as Tink sends them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from executors.encrypt.kms import Aead, KmsError, import_sdk, key_path

KMS_TYPE = "gcp-kms"
ACCOUNT_TYPE = "account.type"
CLIENT_ID = "client.id"
CLIENT_EMAIL = "client.email"
PRIVATE_KEY_ID = "private.key.id"
PRIVATE_KEY = "private.key"
TOKEN_URI = "token.uri"
DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"
AAD = "additional_authenticated_data"
_ID = r"[a-zA-Z0-9_-]{1,63}"
_NAME = rf"projects/[^/]+/locations/{_ID}/keyRings/{_ID}/cryptoKeys/{_ID}"
_KEY = re.compile(_NAME)
_KEY_VERSION = re.compile(rf"{_NAME}/cryptoKeyVersions/{_ID}")


class GcpKmsDriver:
    """The `gcp-kms` KMS type."""

    kms_type = KMS_TYPE

    def __repr__(self) -> str:
        return "GcpKmsDriver()"

    def new_aead(self, config: Mapping[str, str], kms_key_id: str) -> Aead:
        name = key_path(kms_key_id, KMS_TYPE)
        if not (_KEY.fullmatch(name) or _KEY_VERSION.fullmatch(name)):
            raise KmsError(
                f"gcp-kms key id {kms_key_id!r} is not a CryptoKey name "
                "(projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>)"
            )
        kms_v1 = import_sdk("google.cloud.kms_v1", KMS_TYPE, "gcp")
        credentials = _credentials(config, kms_key_id)
        try:
            client = kms_v1.KeyManagementServiceClient(credentials=credentials)
        except Exception as e:  # e.g. no application default credentials
            raise KmsError(f"gcp-kms key id {kms_key_id!r}: no Cloud KMS client: {e}") from e
        return GcpKmsAead(client, name)


class GcpKmsAead:
    """Wraps and unwraps with one Cloud KMS CryptoKey, by its resource name."""

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self._name = name

    def __repr__(self) -> str:
        return f"GcpKmsAead({self._name!r})"

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        request = {"name": self._name, "plaintext": plaintext, AAD: associated_data}
        try:
            return bytes(self._client.encrypt(request=request).ciphertext)
        except Exception as e:
            raise KmsError(f"gcp-kms key {self._name!r}: Encrypt failed: {e}") from e

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        if _KEY_VERSION.fullmatch(self._name):
            raise KmsError(
                f"gcp-kms key {self._name!r} is a CryptoKeyVersion: Cloud KMS decrypts with the CryptoKey"
            )
        request = {"name": self._name, "ciphertext": ciphertext, AAD: associated_data}
        try:
            return bytes(self._client.decrypt(request=request).plaintext)
        except Exception as e:
            raise KmsError(f"gcp-kms key {self._name!r}: Decrypt failed: {e}") from e


def _credentials(config: Mapping[str, str], kms_key_id: str) -> Any:
    """The config's service account, or None for the application default credentials."""
    account_type = config.get(ACCOUNT_TYPE) or "service_account"
    if account_type != "service_account":
        raise KmsError(f"gcp-kms key id {kms_key_id!r}: {ACCOUNT_TYPE} must be 'service_account'")
    fields = {
        "client_id": config.get(CLIENT_ID),
        "client_email": config.get(CLIENT_EMAIL),
        "private_key_id": config.get(PRIVATE_KEY_ID),
        "private_key": config.get(PRIVATE_KEY),
    }
    if not all(fields.values()):
        return None
    service_account = import_sdk("google.oauth2.service_account", KMS_TYPE, "gcp")
    info = {"type": account_type, **fields, "token_uri": config.get(TOKEN_URI) or DEFAULT_TOKEN_URI}
    try:
        return service_account.Credentials.from_service_account_info(info)
    except Exception as e:
        # Only the error's type: a parser's message could quote the private key.
        raise KmsError(
            f"gcp-kms key id {kms_key_id!r}: the config's service account is invalid ({type(e).__name__})"
        ) from None
