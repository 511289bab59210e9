"""SchemaRegistryClient against a hostile registry on loopback: answers about something else than
what was asked, and compression bombs."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from typing import Any

import pytest
from registry_server import RegistryServer, Reply, json_reply

from contracts.errors import RegistryError
from contracts.model import Schema
from contracts.registry.http import SchemaRegistryClient

USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]})


def client_for(server: RegistryServer, **options: Any) -> SchemaRegistryClient:
    settings: dict[str, Any] = {"max_retries": 0, "connect_timeout": 1.0, "read_timeout": 2.0}
    return SchemaRegistryClient(server.url, **{**settings, **options})


def version_answer(subject: str = "users-value", version: int = 1, schema_id: int = 1) -> dict[str, Any]:
    return {"subject": subject, "version": version, "id": schema_id, "schema": USER}


# -- answers that do not match their request (docs/semantics.md §9.6) -------------------------------


@pytest.mark.parametrize(
    ("asked", "answer", "named"),
    [
        (2, version_answer(version=1), ["subject 'users-value' version 2", "version 1"]),
        (1, version_answer(subject="other-value"), ["subject 'users-value' version 1", "'other-value'"]),
        (7, version_answer(subject="other-value", version=3), ["version 7", "'other-value' version 3"]),
    ],
)
def test_a_version_answered_for_another_subject_or_version_is_refused(
    registry_server: RegistryServer, asked: int, answer: dict[str, Any], named: list[str]
) -> None:
    registry_server.inject(json_reply(200, answer))
    client = client_for(registry_server)
    with pytest.raises(RegistryError) as error:
        client.get_version("users-value", asked)
    assert all(part in str(error.value) for part in named), str(error.value)
    # Nothing of the wrong answer was kept: the next call asks again.
    registry_server.inject(json_reply(200, version_answer(version=asked)))
    assert client.get_version("users-value", asked).version == asked
    assert registry_server.count() == 2


def test_version_zero_answered_as_one_is_refused(registry_server: RegistryServer) -> None:
    registry_server.inject(json_reply(200, version_answer(version=1)))
    with pytest.raises(RegistryError, match="version 0 with subject 'users-value' version 1"):
        client_for(registry_server).get_version("users-value", 0)


@pytest.mark.parametrize("latest", ["latest", -1])
def test_the_latest_version_may_be_any_version_of_the_subject(
    registry_server: RegistryServer, latest: int | str
) -> None:
    registry_server.inject(json_reply(200, version_answer(version=9)))
    assert client_for(registry_server).get_version("users-value", latest).version == 9


def test_the_latest_version_of_another_subject_is_refused(registry_server: RegistryServer) -> None:
    registry_server.inject(json_reply(200, version_answer(subject="other-value", version=9)))
    with pytest.raises(RegistryError, match="for subject 'users-value' with subject 'other-value'"):
        client_for(registry_server).get_latest_version("users-value")


def test_lookups_and_metadata_answers_of_another_subject_are_refused(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    registry_server.inject(json_reply(200, version_answer(subject="other-value")))
    with pytest.raises(RegistryError, match=r"POST /subjects/.*'other-value'"):
        client.lookup_schema("users-value", Schema(USER))
    registry_server.inject(json_reply(200, version_answer(subject="other-value")))
    with pytest.raises(RegistryError, match=r"metadata.*'other-value'"):
        client.get_latest_with_metadata("users-value", {"owner": "a"})


def test_a_schema_by_id_may_omit_its_id_and_subject_but_not_name_another_id(
    registry_server: RegistryServer,
) -> None:
    client = client_for(registry_server)
    registry_server.inject(json_reply(200, {"schema": USER}))
    assert client.get_schema(5).schema_str == USER
    registry_server.inject(json_reply(200, {"id": 6, "schema": USER}))
    with pytest.raises(RegistryError, match="for schema id 7 with schema id 6"):
        client.get_schema(7)


def test_a_schema_by_guid_naming_another_guid_is_refused(registry_server: RegistryServer) -> None:
    asked, other = "0b7a9c4e-6f7d-4c2e-9a51-6d9f1f3b2a10", "11111111-2222-4333-8444-555555555555"
    client = client_for(registry_server)
    registry_server.inject(json_reply(200, {"guid": asked.upper(), "schema": USER}))
    assert client.get_schema_by_guid(asked).schema_str == USER
    registry_server.inject(json_reply(200, {"guid": other, "schema": USER}))
    wrong = "0b7a9c4e-6f7d-4c2e-9a51-6d9f1f3b2a11"
    with pytest.raises(RegistryError, match=f"for schema guid {wrong} with schema guid '{other}'"):
        client.get_schema_by_guid(wrong)


def test_deleting_one_version_answered_with_another_is_refused(registry_server: RegistryServer) -> None:
    registry_server.inject(json_reply(200, 4))
    with pytest.raises(RegistryError, match="version 3 with version 4"):
        client_for(registry_server).delete_version("users-value", 3)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("subject", "payments-value", "subject 'users-value'"),
        ("kekName", "other-kek", "KEK 'kek1'"),
        ("version", 2, "version 1"),
        ("algorithm", "AES128_GCM", "algorithm 'AES256_GCM'"),
    ],
)
def test_a_dek_answered_for_another_kek_subject_version_or_algorithm_is_refused(
    registry_server: RegistryServer, field: str, value: Any, named: str
) -> None:
    answer = {
        "kekName": "kek1",
        "subject": "users-value",
        "version": 1,
        "algorithm": "AES256_GCM",
        "encryptedKeyMaterial": "d3JhcHBlZA==",
    }
    registry_server.inject(json_reply(200, {**answer, field: value}))
    with pytest.raises(RegistryError, match=f"for {named}") as error:
        client_for(registry_server).get_dek("kek1", "users-value", version=1)
    assert "d3JhcHBlZA" not in str(error.value)


def test_the_newest_dek_may_be_any_version(registry_server: RegistryServer) -> None:
    answer = {"kekName": "kek1", "subject": "users-value", "version": 5, "algorithm": "AES256_GCM"}
    registry_server.inject(json_reply(200, answer))
    assert client_for(registry_server).get_dek("kek1", "users-value", version=-1).version == 5


def test_a_kek_answered_under_another_name_is_refused(registry_server: RegistryServer) -> None:
    registry_server.inject(json_reply(200, {"name": "other", "kmsType": "local-kms", "kmsKeyId": "k"}))
    with pytest.raises(RegistryError, match="for KEK 'kek1' with KEK 'other'"):
        client_for(registry_server).get_kek("kek1")


# -- compressed answers: the size cap counts decoded bytes as they are decoded (docs/semantics.md §10.13)

MiB = 1024 * 1024


def zeros_compressed(size: int, compressor: Any) -> bytes:
    """`size` zero bytes through `compressor` (zlib-style compressobj), 1 MiB at a time."""
    block = bytes(MiB)
    parts = [compressor.compress(block) for _ in range(size // MiB)]
    return b"".join([*parts, compressor.flush()])


def gzip_of(size: int) -> bytes:
    return zeros_compressed(size, zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS))


def peak_while(call: Any) -> tuple[BaseException, int]:
    """The error `call` raises and the most memory Python held meanwhile."""
    tracemalloc.start()
    try:
        with pytest.raises(RegistryError) as error:
            call()
        return error.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """Small bodies that decode to 64 MiB, one coding or two stacked, built once."""
    gzipped, deflated = gzip_of(64 * MiB), zeros_compressed(64 * MiB, zlib.compressobj(6))
    return {
        "gzip": gzipped,
        "deflate": deflated,
        "gzip, gzip": gzip.compress(gzipped, 6),
        "deflate, gzip": gzip.compress(deflated, 6),
    }


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "gzip, gzip", "deflate, gzip"])
def test_a_compression_bomb_is_cut_at_the_cap_without_growing_the_process(
    registry_server: RegistryServer, bombs: dict[str, bytes], encoding: str
) -> None:
    payload = bombs[encoding]
    assert len(payload) < 100 * 1024
    registry_server.inject(Reply(200, payload, (("Content-Encoding", encoding),)))
    client = client_for(registry_server, max_response_bytes=MiB)
    error, peak = peak_while(client.get_subjects)
    assert "larger than max_response_bytes=1048576" in str(error)
    assert peak < 8 * MiB


@pytest.mark.parametrize("encoding", ["zstd", "br", "compress", "gzip, zstd"])
def test_an_encoding_not_asked_for_is_refused_undecoded(
    registry_server: RegistryServer, encoding: str
) -> None:
    registry_server.inject(Reply(200, b"\x28\xb5\x2f\xfd" + bytes(64), (("Content-Encoding", encoding),)))
    with pytest.raises(RegistryError, match=f"Content-Encoding '{encoding.split(', ')[-1]}'"):
        client_for(registry_server).get_subjects()
    assert registry_server.requests[-1].headers["accept-encoding"] == "gzip, deflate"


def test_a_zstd_bomb_never_grows_the_process(registry_server: RegistryServer) -> None:
    zstandard = pytest.importorskip("zstandard")
    payload = zeros_compressed(256 * MiB, zstandard.ZstdCompressor(level=3).compressobj())
    assert len(payload) < 64 * 1024
    registry_server.inject(Reply(200, payload, (("Content-Encoding", "zstd"),)))
    error, peak = peak_while(client_for(registry_server).get_subjects)
    assert "Content-Encoding 'zstd'" in str(error)
    assert peak < 8 * MiB


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "identity", "gzip, identity", "GZIP"])
def test_compressed_answers_within_the_cap_decode(registry_server: RegistryServer, encoding: str) -> None:
    answer = json.dumps(["users-value"] * 10_000).encode()
    compress = {
        "gzip": gzip.compress,
        "deflate": zlib.compress,
        "identity": bytes,
        "gzip, identity": gzip.compress,
        "GZIP": gzip.compress,
    }[encoding]
    registry_server.inject(Reply(200, compress(answer), (("Content-Encoding", encoding),)))
    assert client_for(registry_server).get_subjects() == ["users-value"] * 10_000


def test_a_truncated_compressed_answer_is_a_registry_error(registry_server: RegistryServer) -> None:
    registry_server.inject(Reply(200, gzip.compress(b'["a"]')[:-12], (("Content-Encoding", "gzip"),)))
    with pytest.raises(RegistryError, match="does not decode: the compressed body ends early"):
        client_for(registry_server).get_subjects()
