"""The `aws-kms` driver: a KEK in AWS KMS wraps and unwraps DEKs through boto3 (the `aws` extra).

As the reference's AwsKmsDriver: the key id is the key's ARN (`arn:aws:kms:<region>:<account>:
key/<id>`, optionally as the key URL `aws-kms://<arn>`), the region comes from it; credentials are
the config's `access.key.id` and `secret.access.key`, else its `profile`, else boto3's default
chain; with `role.arn` (else $AWS_ROLE_ARN, unless $AWS_WEB_IDENTITY_TOKEN_FILE is set) they assume
that role (`role.session.name`, default `confluent-encrypt`; `role.external.id`). Wrapping is KMS
Encrypt with the ARN and the plaintext DEK, unwrapping KMS Decrypt, the associated data (empty for
DEKs) hex-encoded in the encryption context as Tink writes it, so either side unwraps the other's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from executors.encrypt.kms import Aead, KmsError, import_sdk, key_path

KMS_TYPE = "aws-kms"
ACCESS_KEY_ID = "access.key.id"
SECRET_ACCESS_KEY = "secret.access.key"
PROFILE = "profile"
ROLE_ARN = "role.arn"
ROLE_SESSION_NAME = "role.session.name"
ROLE_EXTERNAL_ID = "role.external.id"
DEFAULT_SESSION_NAME = "confluent-encrypt"


class AwsKmsDriver:
    """The `aws-kms` KMS type."""

    kms_type = KMS_TYPE

    def __repr__(self) -> str:
        return "AwsKmsDriver()"

    def new_aead(self, config: Mapping[str, str], kms_key_id: str) -> Aead:
        arn = key_path(kms_key_id, KMS_TYPE)
        region = _region(arn, kms_key_id)
        boto3 = import_sdk("boto3", KMS_TYPE, "aws")
        session = _session(boto3, config, region, kms_key_id)
        return AwsKmsAead(session.client("kms"), arn)


class AwsKmsAead:
    """Wraps and unwraps with one AWS KMS key, by its ARN."""

    def __init__(self, client: Any, arn: str) -> None:
        self._client = client
        self._arn = arn

    def __repr__(self) -> str:
        return f"AwsKmsAead({self._arn!r})"

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes:
        try:
            response = self._client.encrypt(
                KeyId=self._arn, Plaintext=plaintext, EncryptionContext=_context(associated_data)
            )
        except Exception as e:
            raise KmsError(f"aws-kms key {self._arn!r}: Encrypt failed: {e}") from e
        return bytes(response["CiphertextBlob"])

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        try:
            response = self._client.decrypt(
                KeyId=self._arn, CiphertextBlob=ciphertext, EncryptionContext=_context(associated_data)
            )
        except Exception as e:
            raise KmsError(f"aws-kms key {self._arn!r}: Decrypt failed: {e}") from e
        return bytes(response["Plaintext"])


def _region(arn: str, kms_key_id: str) -> str:
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or parts[2] != "kms" or not parts[3]:
        raise KmsError(
            f"aws-kms key id {kms_key_id!r} is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)"
        )
    return parts[3]


def _session(boto3: Any, config: Mapping[str, str], region: str, kms_key_id: str) -> Any:
    """A boto3 session with the config's credentials, under the config's role if it names one."""
    key, secret, profile = config.get(ACCESS_KEY_ID), config.get(SECRET_ACCESS_KEY), config.get(PROFILE)
    try:
        if key and secret:
            session = boto3.Session(region_name=region, aws_access_key_id=key, aws_secret_access_key=secret)
        elif profile:
            session = boto3.Session(region_name=region, profile_name=profile)
        else:
            session = boto3.Session(region_name=region)
    except Exception as e:  # e.g. a profile the AWS config files lack
        raise KmsError(f"aws-kms key id {kms_key_id!r}: no AWS session: {e}") from e
    role_arn = config.get(ROLE_ARN) or os.environ.get("AWS_ROLE_ARN")
    if not role_arn or os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return session
    params = {
        "RoleArn": role_arn,
        "RoleSessionName": config.get(ROLE_SESSION_NAME)
        or os.environ.get("AWS_ROLE_SESSION_NAME")
        or DEFAULT_SESSION_NAME,
    }
    external_id = config.get(ROLE_EXTERNAL_ID) or os.environ.get("AWS_ROLE_EXTERNAL_ID")
    if external_id:
        params["ExternalId"] = external_id
    try:
        credentials = session.client("sts").assume_role(**params)["Credentials"]
    except Exception as e:
        raise KmsError(f"aws-kms key id {kms_key_id!r}: cannot assume role {role_arn!r}: {e}") from e
    return boto3.Session(
        region_name=region,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )


def _context(associated_data: bytes) -> dict[str, str]:
    """Tink's encryption context: the associated data in hex, none when it is empty."""
    return {"associatedData": associated_data.hex()} if associated_data else {}
