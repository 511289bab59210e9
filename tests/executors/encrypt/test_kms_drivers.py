"""The cloud KMS drivers (aws-kms, gcp-kms, azure-kms, hcvault) against their SDKs' own stubbing
seams, never the network: botocore's Stubber, Cloud KMS's gRPC transport under its generated
client, an azure-core transport answering as Key Vault, and a `requests` adapter on hvac's session
answering as Vault. Each test checks the request the driver sends, the wrap -> unwrap round trip,
and parity with the reference's driver (the same request for the same inputs; each unwraps the
other's DEK).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

import boto3
import pytest
import requests
from azure.core.credentials import AccessToken
from azure.core.pipeline.transport import HttpTransport, RequestsTransport
from azure.core.rest._requests_basic import RestRequestsTransportResponse
from botocore.stub import Stubber
from confluent_kafka.schema_registry.rules.encryption.awskms.aws_driver import AwsKmsDriver as RefAws
from confluent_kafka.schema_registry.rules.encryption.azurekms.azure_driver import AzureKmsDriver as RefAzure
from confluent_kafka.schema_registry.rules.encryption.gcpkms.gcp_driver import GcpKmsDriver as RefGcp
from confluent_kafka.schema_registry.rules.encryption.hcvault.hcvault_driver import (
    HcVaultKmsDriver as RefVault,
)
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from fake_vault import TOKEN, FakeVault, VaultAdapter
from google.api_core.exceptions import PermissionDenied
from google.cloud import kms_v1
from google.cloud.kms_v1.services.key_management_service.transports.grpc import (
    KeyManagementServiceGrpcTransport,
)

from executors.encrypt import KmsError
from executors.encrypt.kms import find_driver
from executors.encrypt.kms_aws import AwsKmsDriver
from executors.encrypt.kms_azure import AzureKmsDriver
from executors.encrypt.kms_gcp import GcpKmsDriver
from executors.encrypt.kms_vault import VaultKmsDriver

DEK = bytes(range(32))
AWS_ARN = "arn:aws:kms:eu-west-3:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
AWS_SECRET = "aws-secret-access-key-do-not-leak"
AWS_CONFIG = {"access.key.id": "AKIAEXAMPLE", "secret.access.key": AWS_SECRET}
GCP_KEY = "projects/p1/locations/europe-west1/keyRings/ring1/cryptoKeys/kek1"
VAULT_KEY = "https://vault.example:8200/transit/keys/orders"
AZURE_VAULT = "https://contoso.vault.azure.net"
AZURE_VERSION = "0123456789abcdef0123456789abcdef"
AZURE_KEY = f"{AZURE_VAULT}/keys/kek1/{AZURE_VERSION}"
AZURE_SECRET = "azure-client-secret-do-not-leak"
AZURE_CONFIG = {"tenant.id": "tenant1", "client.id": "client1", "client.secret": AZURE_SECRET}


def test_the_drivers_are_found_by_kms_type_through_entry_points() -> None:
    types = {
        "aws-kms": AwsKmsDriver,
        "gcp-kms": GcpKmsDriver,
        "azure-kms": AzureKmsDriver,
        "hcvault": VaultKmsDriver,
    }
    for kms_type, cls in types.items():
        assert isinstance(find_driver(kms_type), cls)


@pytest.mark.parametrize(
    ("driver", "module", "key_id", "extra"),
    [
        (AwsKmsDriver(), "boto3", AWS_ARN, "aws"),
        (GcpKmsDriver(), "google.cloud.kms_v1", GCP_KEY, "gcp"),
        (AzureKmsDriver(), "azure.keyvault.keys.crypto", AZURE_KEY, "azure"),
        (VaultKmsDriver(), "hvac", VAULT_KEY, "vault"),
    ],
)
def test_a_missing_sdk_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, driver: Any, module: str, key_id: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` then raises ImportError
    with pytest.raises(KmsError, match=re.escape(f"pip install 'spark-data-contracts[{extra}]'")):
        driver.new_aead({}, key_id)


# --- AWS -------------------------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[dict[str, list[Any]]]:
    """Every boto3 client made in the test gets a Stubber answering from `responses[service]`
    (method, response, expected params); the clients made are kept in `clients`."""
    for name in ("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    state: dict[str, list[Any]] = {"kms": [], "sts": [], "clients": [], "stubbers": []}
    original = boto3.session.Session.client

    def client(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        made = original(self, service, *args, **kwargs)
        stubber = Stubber(made)
        for method, response, expected in state[service]:
            stubber.add_response(method, response, expected)
        stubber.activate()
        state["clients"].append(made)
        state["stubbers"].append(stubber)
        return made

    monkeypatch.setattr(boto3.session.Session, "client", client)
    yield state
    for stubber in state["stubbers"]:
        stubber.assert_no_pending_responses()


def _aws_calls(wrapped: bytes) -> list[Any]:
    return [
        ("encrypt", {"CiphertextBlob": wrapped, "KeyId": AWS_ARN}, _encrypt_params()),
        ("decrypt", {"Plaintext": DEK, "KeyId": AWS_ARN}, _decrypt_params(wrapped)),
    ]


def _encrypt_params() -> dict[str, Any]:
    return {"KeyId": AWS_ARN, "Plaintext": DEK, "EncryptionContext": {}}


def _decrypt_params(wrapped: bytes) -> dict[str, Any]:
    return {"KeyId": AWS_ARN, "CiphertextBlob": wrapped, "EncryptionContext": {}}


def test_aws_wraps_with_encrypt_and_unwraps_with_decrypt_by_the_key_arn(aws: dict[str, list[Any]]) -> None:
    wrapped = b"\x01\x02aws-wrapped-dek"
    aws["kms"] = [_aws_calls(wrapped)[0]]
    assert AwsKmsDriver().new_aead(AWS_CONFIG, AWS_ARN).encrypt(DEK, b"") == wrapped
    aws["kms"] = [_aws_calls(wrapped)[1]]
    # The key URL form is the same key.
    assert AwsKmsDriver().new_aead(AWS_CONFIG, f"aws-kms://{AWS_ARN}").decrypt(wrapped, b"") == DEK
    for client in aws["clients"]:
        assert client.meta.region_name == "eu-west-3"
        credentials = client._request_signer._credentials
        assert (credentials.access_key, credentials.secret_key) == ("AKIAEXAMPLE", AWS_SECRET)


def test_aws_assumes_the_configured_role_for_its_kms_client(aws: dict[str, list[Any]]) -> None:
    role = "arn:aws:iam::111122223333:role/encrypt"
    expected = {"RoleArn": role, "RoleSessionName": "confluent-encrypt", "ExternalId": "ext-1"}
    assumed = {
        "AccessKeyId": "ASIAROLEEXAMPLE0",
        "SecretAccessKey": "role-secret",
        "SessionToken": "role-token",
    }
    aws["sts"] = [
        ("assume_role", {"Credentials": {**assumed, "Expiration": "2030-01-01T00:00:00Z"}}, expected)
    ]
    aws["kms"] = [_aws_calls(b"w")[0]]
    config = {**AWS_CONFIG, "role.arn": role, "role.external.id": "ext-1"}
    assert AwsKmsDriver().new_aead(config, AWS_ARN).encrypt(DEK, b"") == b"w"
    kms = aws["clients"][-1]
    credentials = kms._request_signer._credentials
    assert (credentials.access_key, credentials.token) == ("ASIAROLEEXAMPLE0", "role-token")


def test_aws_wraps_and_unwraps_as_the_reference_driver(aws: dict[str, list[Any]]) -> None:
    """Same requests, byte for byte (the Stubber checks the params); each unwraps the other's DEK."""
    wrapped = b"aws-kms-ciphertext-blob"
    url = f"aws-kms://{AWS_ARN}"
    aws["kms"] = _aws_calls(wrapped)
    reference = RefAws().new_kms_client(dict(AWS_CONFIG), url).get_aead(url)
    ours = AwsKmsDriver().new_aead(AWS_CONFIG, AWS_ARN)
    assert ours.encrypt(DEK, b"") == reference.encrypt(DEK, b"") == wrapped
    assert ours.decrypt(wrapped, b"") == reference.decrypt(wrapped, b"") == DEK


def test_aws_bad_key_ids_and_kms_errors_are_kms_errors_naming_the_key(aws: dict[str, list[Any]]) -> None:
    with pytest.raises(KmsError, match="'aws-kms://alias/orders' is not a KMS key ARN"):
        AwsKmsDriver().new_aead(AWS_CONFIG, "aws-kms://alias/orders")
    with pytest.raises(KmsError, match="needs a kms key id"):
        AwsKmsDriver().new_aead(AWS_CONFIG, "")
    with pytest.raises(KmsError, match=re.escape(f"aws-kms key id {AWS_ARN!r}: no AWS session")):
        AwsKmsDriver().new_aead({"profile": "absent"}, AWS_ARN)
    aead = AwsKmsDriver().new_aead(AWS_CONFIG, AWS_ARN)
    aws["stubbers"][-1].add_client_error("decrypt", "IncorrectKeyException", "wrong key")
    with pytest.raises(KmsError, match=re.escape(f"aws-kms key {AWS_ARN!r}: Decrypt failed")) as error:
        aead.decrypt(b"blob", b"")
    assert "IncorrectKeyException" in str(error.value)


# --- GCP -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service_account() -> dict[str, str]:
    """A service account's config, with a freshly made private key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return {
        "client.id": "1234",
        "client.email": "encrypt@p1.iam.gserviceaccount.com",
        "private.key.id": "key-id-1",
        "private.key": pem,
    }


@pytest.fixture
def gcp(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, service_account: dict[str, str]) -> list[Any]:
    """Cloud KMS's gRPC transport answers here, under the generated client (which builds the
    request proto and its routing header): each (method, request, metadata, transport) is kept.
    The "ciphertext" is the plaintext reversed behind a marker, so decrypt can undo it (and
    refuses any other). The default credentials are a service account file (the reference's
    client makes a client with them first), so nothing asks a metadata server."""
    seen: list[Any] = []
    info = {key.replace(".", "_"): value for key, value in service_account.items()}
    info |= {"type": "service_account", "token_uri": "https://oauth2.googleapis.com/token"}
    (tmp_path / "adc.json").write_text(json.dumps(info))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "adc.json"))

    def encrypt(transport: Any, request: Any, metadata: Any = (), **kwargs: Any) -> Any:
        seen.append(("encrypt", request, metadata, transport))
        return kms_v1.EncryptResponse(name=request.name, ciphertext=b"gcp:" + request.plaintext[::-1])

    def decrypt(transport: Any, request: Any, metadata: Any = (), **kwargs: Any) -> Any:
        seen.append(("decrypt", request, metadata, transport))
        if not request.ciphertext.startswith(b"gcp:"):
            raise PermissionDenied("Permission 'cloudkms.cryptoKeyVersions.useToDecrypt' denied")
        return kms_v1.DecryptResponse(plaintext=request.ciphertext.removeprefix(b"gcp:")[::-1])

    def stub(method: Any) -> property:
        # One callable per transport: the client finds its wrapped method by it.
        return property(
            lambda transport: transport.__dict__.setdefault(method.__name__, partial(method, transport))
        )

    monkeypatch.setattr(KeyManagementServiceGrpcTransport, "encrypt", stub(encrypt))
    monkeypatch.setattr(KeyManagementServiceGrpcTransport, "decrypt", stub(decrypt))
    return seen


def test_gcp_wraps_and_unwraps_with_the_key_name_and_service_account(
    gcp: list[Any], service_account: dict[str, str]
) -> None:
    aead = GcpKmsDriver().new_aead(service_account, f"gcp-kms://{GCP_KEY}")
    wrapped = aead.encrypt(DEK, b"")
    assert aead.decrypt(wrapped, b"") == DEK
    assert [(method, request) for method, request, _, _ in gcp] == [
        ("encrypt", kms_v1.EncryptRequest(name=GCP_KEY, plaintext=DEK, additional_authenticated_data=b"")),
        (
            "decrypt",
            kms_v1.DecryptRequest(name=GCP_KEY, ciphertext=wrapped, additional_authenticated_data=b""),
        ),
    ]
    assert ("x-goog-request-params", f"name={GCP_KEY}") in gcp[0][2]
    credentials = gcp[0][3]._credentials
    assert credentials.service_account_email == "encrypt@p1.iam.gserviceaccount.com"


def test_gcp_sends_the_reference_drivers_requests(gcp: list[Any], service_account: dict[str, str]) -> None:
    """Byte-identical request protos; each unwraps the other's DEK."""
    url = f"gcp-kms://{GCP_KEY}"
    reference = RefGcp().new_kms_client(dict(service_account), url).get_aead(url)
    ours = GcpKmsDriver().new_aead(service_account, GCP_KEY)
    assert ours.decrypt(reference.encrypt(DEK, b""), b"") == DEK
    assert reference.decrypt(ours.encrypt(DEK, b""), b"") == DEK
    wire = [type(request).serialize(request) for _, request, _, _ in gcp]
    assert (wire[0], wire[3]) == (wire[2], wire[1])


def test_gcp_bad_key_ids_and_accounts_are_kms_errors(gcp: list[Any], service_account: dict[str, str]) -> None:
    with pytest.raises(KmsError, match=re.escape("'projects/p1/keyRings/r' is not a CryptoKey name")):
        GcpKmsDriver().new_aead(service_account, "projects/p1/keyRings/r")
    with pytest.raises(KmsError, match=re.escape("account.type must be 'service_account'")):
        GcpKmsDriver().new_aead({**service_account, "account.type": "user"}, GCP_KEY)
    broken = {**service_account, "private.key": "-----BEGIN PRIVATE KEY-----\nnot-a-key-do-not-leak\n"}
    with pytest.raises(KmsError, match="service account is invalid") as error:
        GcpKmsDriver().new_aead(broken, GCP_KEY)
    assert "not-a-key-do-not-leak" not in str(error.value)
    with pytest.raises(KmsError, match="CryptoKeyVersion"):
        GcpKmsDriver().new_aead(service_account, f"{GCP_KEY}/cryptoKeyVersions/1").decrypt(b"x", b"")


# --- Azure -----------------------------------------------------------------------------------


class FakeCredential:
    """A TokenCredential that never calls Entra ID; the arguments it was made with are kept."""

    made: list[tuple[Any, ...]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        FakeCredential.made.append(args)

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("azure-access-token", 4102444800)


class FakeKeyVault(HttpTransport):
    """An azure-core transport answering as Key Vault for one RSA key (versions share it): a
    challenge first, 403 on reading the key (so the client encrypts remotely), RSA-OAEP-256
    encrypt and decrypt, and the key's latest version."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.seen: list[tuple[str, str, dict[str, Any]]] = []

    def __enter__(self) -> FakeKeyVault:
        return self

    def __exit__(self, *args: Any) -> None:
        """Nothing to release."""

    def open(self) -> None:
        """Nothing to open."""

    def close(self) -> None:
        """Nothing to close."""

    def send(self, request: Any, **kwargs: Any) -> Any:
        path = requests.utils.urlparse(request.url).path
        body = json.loads(request.body) if request.body else {}
        if "Authorization" not in request.headers:
            challenge = 'Bearer authorization="https://login.microsoftonline.com/tenant1", resource="https://vault.azure.net"'
            return self._answer(request, 401, {}, {"WWW-Authenticate": challenge})
        self.seen.append((request.method, path, body))
        oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)
        if path.endswith("/encrypt") and body.get("alg") == "RSA-OAEP-256":
            sealed = self.key.public_key().encrypt(_b64url_decode(body["value"]), oaep)
            return self._answer(
                request, 200, {"kid": request.url.split("/encrypt")[0], "value": _b64url(sealed)}
            )
        if path.endswith("/decrypt") and body.get("alg") == "RSA-OAEP-256":
            try:
                plain = self.key.decrypt(_b64url_decode(body["value"]), oaep)
            except ValueError:
                return self._answer(
                    request, 400, {"error": {"code": "BadParameter", "message": "decrypt failed"}}
                )
            return self._answer(
                request, 200, {"kid": request.url.split("/decrypt")[0], "value": _b64url(plain)}
            )
        if request.method == "GET" and path == "/keys/kek1/":
            kid = f"{AZURE_VAULT}/keys/kek1/{AZURE_VERSION}"
            return self._answer(request, 200, {"key": {"kid": kid, "kty": "RSA"}, "attributes": {}})
        return self._answer(request, 403, {"error": {"code": "Forbidden", "message": "no keys/get"}})

    @staticmethod
    def _answer(request: Any, status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
        response = requests.Response()
        response.status_code = status
        response.raw = io.BytesIO(json.dumps(body).encode())
        response.headers.update({"Content-Type": "application/json", **(headers or {})})
        response.reason = "fake"
        return RestRequestsTransportResponse(request=request, internal_response=response)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> FakeKeyVault:
    """Client-secret credentials made here are fakes; Key Vault answers through the fake transport,
    also for clients made with azure-core's default transport (the reference's)."""
    import azure.identity
    from confluent_kafka.schema_registry.rules.encryption.azurekms import azure_driver

    FakeCredential.made = []
    monkeypatch.setattr(azure.identity, "ClientSecretCredential", FakeCredential)
    monkeypatch.setattr(azure_driver, "ClientSecretCredential", FakeCredential)
    vault = FakeKeyVault()
    monkeypatch.setattr(RequestsTransport, "send", lambda self, request, **kwargs: vault.send(request))
    return vault


def test_azure_wraps_with_rsa_oaep_256_encrypt_and_unwraps_with_decrypt(azure: FakeKeyVault) -> None:
    aead = AzureKmsDriver(transport=azure).new_aead(AZURE_CONFIG, f"azure-kms://{AZURE_KEY}")
    wrapped = aead.encrypt(DEK, b"")
    assert aead.decrypt(wrapped, b"") == DEK
    encrypts = [(p, b) for method, p, b in azure.seen if p.endswith("/encrypt")]
    assert encrypts == [
        (f"/keys/kek1/{AZURE_VERSION}/encrypt", {"alg": "RSA-OAEP-256", "value": _b64url(DEK)})
    ]
    decrypts = [(p, b) for method, p, b in azure.seen if p.endswith("/decrypt")]
    assert decrypts == [
        (f"/keys/kek1/{AZURE_VERSION}/decrypt", {"alg": "RSA-OAEP-256", "value": _b64url(wrapped)})
    ]
    assert FakeCredential.made[0] == ("tenant1", "client1", AZURE_SECRET)


def test_azure_keeps_the_key_version_in_the_wrapped_dek_when_asked(azure: FakeKeyVault) -> None:
    """A versionless key id with encrypt.azure.key.version.save: the latest version is resolved,
    written in front, and unwrapping targets it."""
    config = {**AZURE_CONFIG, "encrypt.azure.key.version.save": "true"}
    aead = AzureKmsDriver(transport=azure).new_aead(config, f"{AZURE_VAULT}/keys/kek1")
    wrapped = aead.encrypt(DEK, b"")
    assert wrapped.startswith(f"azure:v1:{AZURE_VERSION}:".encode())
    assert (
        AzureKmsDriver(transport=azure)
        .new_aead(AZURE_CONFIG, f"{AZURE_VAULT}/keys/kek1")
        .decrypt(wrapped, b"")
        == DEK
    )
    assert f"/keys/kek1/{AZURE_VERSION}/decrypt" in [p for _, p, _ in azure.seen]


@pytest.mark.parametrize("save_version", ["false", "true"])
def test_azure_deks_unwrap_in_the_reference_driver_and_back(azure: FakeKeyVault, save_version: str) -> None:
    config = {**AZURE_CONFIG, "encrypt.azure.key.version.save": save_version}
    url = f"azure-kms://{AZURE_KEY}"
    reference = RefAzure().new_kms_client(dict(config), url).get_aead(url)
    ours = AzureKmsDriver().new_aead(config, AZURE_KEY)
    assert reference.decrypt(ours.encrypt(DEK, b""), b"") == DEK
    assert ours.decrypt(reference.encrypt(DEK, b""), b"") == DEK
    bodies = [b for _, p, b in azure.seen if p.endswith("/encrypt")]
    assert bodies[0] == bodies[1] == {"alg": "RSA-OAEP-256", "value": _b64url(DEK)}


def test_azure_bad_key_ids_and_vault_errors_are_kms_errors(
    azure: FakeKeyVault, caplog: pytest.LogCaptureFixture
) -> None:
    AzureKmsDriver().new_aead(AZURE_CONFIG, f"{AZURE_VAULT}/keys/kek1")
    assert "has no version and encrypt.azure.key.version.save is not true" in caplog.text
    with pytest.raises(KmsError, match=re.escape(f"'{AZURE_VAULT}/secrets/x' is not a Key Vault")):
        AzureKmsDriver().new_aead(AZURE_CONFIG, f"{AZURE_VAULT}/secrets/x")
    aead = AzureKmsDriver(transport=azure).new_aead(AZURE_CONFIG, AZURE_KEY)
    with pytest.raises(KmsError, match=re.escape(f"'{AZURE_KEY}': decrypt failed")):
        aead.decrypt(b"\x00" * 256, b"")


# --- HashiCorp Vault -------------------------------------------------------------------------


@pytest.fixture
def vault(monkeypatch: pytest.MonkeyPatch) -> FakeVault:
    """Sessions hvac makes in the test send through a FakeVault adapter."""
    for name in ("VAULT_TOKEN", "VAULT_NAMESPACE", "VAULT_APPROLE_ROLE_ID", "VAULT_APPROLE_SECRET_ID"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeVault()

    class Session(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            self.mount("https://", VaultAdapter(fake))

    monkeypatch.setattr(requests, "Session", Session)
    return fake


def test_vault_wraps_with_transit_encrypt_and_unwraps_with_decrypt(vault: FakeVault) -> None:
    config = {"token.id": TOKEN, "namespace": "team-a"}
    aead = VaultKmsDriver().new_aead(config, f"hcvault://{VAULT_KEY}")
    wrapped = aead.encrypt(DEK, b"")
    assert wrapped.startswith(b"vault:v1:")
    assert aead.decrypt(wrapped, b"") == DEK
    assert [(s.path, s.body) for s in vault.seen] == [
        ("/v1/transit/encrypt/orders", {"plaintext": base64.b64encode(DEK).decode(), "context": ""}),
        ("/v1/transit/decrypt/orders", {"ciphertext": wrapped.decode(), "context": ""}),
    ]
    assert {(s.headers["x-vault-token"], s.headers["x-vault-namespace"]) for s in vault.seen} == {
        (TOKEN, "team-a")
    }


def test_vault_logs_in_with_approle_and_nested_mounts(vault: FakeVault) -> None:
    config = {"approle.role.id": vault.role_id, "approle.secret.id": vault.secret_id}
    aead = VaultKmsDriver().new_aead(config, "https://vault.example:8200/teams/billing/keys/k1")
    assert aead.decrypt(aead.encrypt(DEK, b""), b"") == DEK
    assert [s.path for s in vault.seen] == [
        "/v1/auth/approle/login",
        "/v1/teams/billing/encrypt/k1",
        "/v1/teams/billing/decrypt/k1",
    ]
    assert vault.seen[1].headers["x-vault-token"] == "hvs.approle-login-token"


def test_vault_deks_unwrap_in_the_reference_driver_and_back(vault: FakeVault) -> None:
    config = {"token.id": TOKEN}
    url = f"hcvault://{VAULT_KEY}"
    reference = RefVault().new_kms_client(dict(config), url).get_aead(url)
    ours = VaultKmsDriver().new_aead(config, VAULT_KEY)
    assert reference.decrypt(ours.encrypt(DEK, b""), b"") == DEK
    assert ours.decrypt(reference.encrypt(DEK, b""), b"") == DEK
    encrypts = [(s.path, s.body) for s in vault.seen if "/encrypt/" in s.path]
    assert encrypts[0] == encrypts[1]


def test_vault_bad_key_ids_and_refusals_are_kms_errors(vault: FakeVault) -> None:
    with pytest.raises(KmsError, match=re.escape("'vault.example/transit/orders' is not a Vault")):
        VaultKmsDriver().new_aead({}, "vault.example/transit/orders")
    aead = VaultKmsDriver().new_aead({"token.id": "wrong"}, VAULT_KEY)
    with pytest.raises(KmsError, match=re.escape(f"'{VAULT_KEY}': encrypt failed")):
        aead.encrypt(DEK, b"")


# --- Secrets ---------------------------------------------------------------------------------


def test_no_secret_in_a_drivers_aeads_reprs_errors_or_logs(
    aws: dict[str, list[Any]],
    gcp: list[Any],
    azure: FakeKeyVault,
    vault: FakeVault,
    service_account: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each driver made with secrets in its config, made to fail: the secrets are nowhere in the
    reprs of the driver and its Aead, the errors' messages or the log."""
    caplog.set_level(logging.DEBUG)
    private = service_account["private.key"].splitlines()[1]
    cases = [
        (AwsKmsDriver(), AWS_CONFIG, AWS_ARN, AWS_SECRET),
        (GcpKmsDriver(), service_account, GCP_KEY, private),
        (AzureKmsDriver(transport=azure), AZURE_CONFIG, AZURE_KEY, AZURE_SECRET),
        (VaultKmsDriver(), {"token.id": TOKEN}, VAULT_KEY, TOKEN),
        (
            VaultKmsDriver(),
            {"approle.role.id": "r", "approle.secret.id": vault.secret_id},
            VAULT_KEY,
            vault.secret_id,
        ),
    ]
    errors: list[str] = []
    for driver, config, key_id, secret in cases:
        try:
            aead = driver.new_aead(config, key_id)
        except KmsError as e:  # the AppRole case: a wrong role id is refused at login
            errors.append(str(e))
            assert secret not in repr(driver) + str(e) + repr(e)
            continue
        if isinstance(driver, AwsKmsDriver):
            aws["stubbers"][-1].add_client_error("decrypt", "AccessDeniedException", "not allowed")
        with pytest.raises(KmsError) as error:
            aead.decrypt(b"vault:v1:AAAA" if isinstance(driver, VaultKmsDriver) else b"\x00" * 256, b"")
        errors.append(str(error.value))
        for text in (repr(driver), repr(aead), str(error.value), repr(error.value)):
            assert secret not in text
    assert len(errors) == len(cases)
    for case in cases:
        assert case[3] not in caplog.text
