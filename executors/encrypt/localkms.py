"""The `local-kms` driver: a KEK derived from a secret, for development and tests.

As the reference's LocalKmsDriver: the secret is the rule config's `secret`, else the environment
variable `LOCAL_SECRET`; the KEK is HKDF-SHA256 of it (no salt, no info) cut to 16 bytes, used as
AES128-GCM with Tink's RAW output (12-byte nonce, ciphertext, tag), whatever the key id.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from executors.encrypt.kms import Aead, KmsError

SECRET = "secret"
SECRET_ENVIRONMENT = "LOCAL_SECRET"
_NONCE = 12


class LocalKmsDriver:
    """The built-in `local-kms` KMS type."""

    kms_type = "local-kms"

    def new_aead(self, config: Mapping[str, str], kms_key_id: str) -> Aead:
        secret = config.get(SECRET) or os.environ.get(SECRET_ENVIRONMENT)
        if not secret:
            raise KmsError(
                f"local-kms needs a secret: rule_config {{{SECRET!r}: ...}} or ${SECRET_ENVIRONMENT}"
            )
        return _LocalAead(_derive(secret))


class _LocalAead:
    def __init__(self, key: bytes) -> None:
        self._cipher = AESGCM(key)

    def __repr__(self) -> str:
        return "LocalKmsAead()"

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._cipher.encrypt(nonce, plaintext, associated_data)

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        return self._cipher.decrypt(ciphertext[:_NONCE], ciphertext[_NONCE:], associated_data)


def _derive(secret: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=b"").derive(secret.encode("utf-8"))
