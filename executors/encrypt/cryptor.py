"""The DEK algorithms as the reference's Tink keysets write them, with the `cryptography` package.

A DEK's key material is Tink's serialized key proto (`AesGcmKey` or `AesSivKey`: version 0 and
the raw key), wrapped by the KEK. Ciphertexts are Tink's RAW output (no key-id prefix): AES-GCM
writes a random 12-byte nonce, the ciphertext and the 16-byte tag; AES-SIV (deterministic) the
16-byte synthetic IV and the ciphertext, with the empty associated data as S2V's one component.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV

from contracts.errors import DataContractError

EMPTY_AAD = b""
_NONCE = 12
# Tink's key protos: AesGcmKey{version=1, key_value=3}, AesSivKey{version=1, key_value=2}.
_KEY_FIELD = {"AES128_GCM": 3, "AES256_GCM": 3, "AES256_SIV": 2}
_KEY_SIZE = {"AES128_GCM": 16, "AES256_GCM": 32, "AES256_SIV": 64}


class KeyMaterialError(DataContractError, ValueError):
    """Key material that is not a key of the expected algorithm (its bytes are never quoted)."""


@dataclass(frozen=True)
class Cryptor:
    """Encrypts and decrypts with one unwrapped DEK of one algorithm; the key never prints."""

    algorithm: str
    _cipher: AESGCM | AESSIV

    def __repr__(self) -> str:
        return f"Cryptor({self.algorithm})"

    @property
    def deterministic(self) -> bool:
        return self.algorithm == "AES256_SIV"

    def encrypt(self, plaintext: bytes, nonce: bytes | None = None) -> bytes:
        """The ciphertext; AES-GCM takes `nonce` (12 bytes from `nonces`), else draws one."""
        if isinstance(self._cipher, AESSIV):
            return self._cipher.encrypt(plaintext, [EMPTY_AAD])
        nonce = nonce or os.urandom(_NONCE)
        return nonce + self._cipher.encrypt(nonce, plaintext, EMPTY_AAD)

    def nonces(self, count: int) -> list[bytes | None]:
        """`count` fresh random nonces for `encrypt`, drawn from the OS in one call (none for AES-SIV)."""
        if self.deterministic:
            return [None] * count
        drawn = os.urandom(_NONCE * count)
        return [drawn[i : i + _NONCE] for i in range(0, _NONCE * count, _NONCE)]

    def decrypt(self, ciphertext: bytes) -> bytes:
        """The plaintext; cryptography.exceptions.InvalidTag for a wrong key or tampered bytes."""
        if isinstance(self._cipher, AESSIV):
            return self._cipher.decrypt(ciphertext, [EMPTY_AAD])
        if len(ciphertext) < _NONCE:
            raise ValueError(f"ciphertext too short: {len(ciphertext)} bytes")
        return self._cipher.decrypt(ciphertext[:_NONCE], ciphertext[_NONCE:], EMPTY_AAD)


def cryptor(algorithm: str, key_material: bytes) -> Cryptor:
    """A Cryptor for a DEK's (unwrapped) Tink key material."""
    key = parse_key(algorithm, key_material)
    return Cryptor(algorithm, AESSIV(key) if algorithm == "AES256_SIV" else AESGCM(key))


def generate_key_material(algorithm: str) -> bytes:
    """A new random DEK as Tink's serialized key proto, as the reference generates it."""
    key = os.urandom(_KEY_SIZE[algorithm])
    return bytes([_KEY_FIELD[algorithm] << 3 | 2]) + _varint(len(key)) + key


def parse_key(algorithm: str, key_material: bytes) -> bytes:
    """The raw key in Tink's serialized key proto: version must be 0, the key its algorithm's size."""
    key: bytes | None = None
    position = 0
    while position < len(key_material):
        tag, position = _read_varint(key_material, position)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, position = _read_varint(key_material, position)
            if number == 1 and value != 0:
                raise KeyMaterialError(f"{algorithm} key version {value} is not supported")
        elif wire == 2:
            size, position = _read_varint(key_material, position)
            if position + size > len(key_material):
                raise KeyMaterialError(f"{algorithm} key material is truncated")
            if number == _KEY_FIELD[algorithm]:
                key = key_material[position : position + size]
            position += size
        else:
            raise KeyMaterialError(f"{algorithm} key material is not a Tink key")
    if key is None or len(key) != _KEY_SIZE[algorithm]:
        raise KeyMaterialError(f"{algorithm} key material holds no {_KEY_SIZE[algorithm]}-byte key")
    return key


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while position < len(data) and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    raise KeyMaterialError("key material is not a Tink key (bad varint)")
