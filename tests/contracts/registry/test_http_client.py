"""SchemaRegistryClient against the loopback Confluent server: REST shapes, faults, caches, auth."""

from __future__ import annotations

import email.utils
import gzip
import json
import logging
import pickle
import threading
import time
import tracemalloc
from typing import Any

import httpx
import pytest
from registry_server import (
    Flood,
    Hangup,
    RegistryServer,
    Reply,
    Stall,
    TlsFiles,
    Trickle,
    error_reply,
    json_reply,
    malformed_reply,
    running_registry,
    unused_url,
)

from contracts.errors import ContractError, RegistryError
from contracts.model import Metadata, RuleSet, Schema
from contracts.registry.http import SchemaRegistryClient
from contracts.registry.local import LocalRegistry

SECRET = "s3cr3t-p@ss"

USER_V1 = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "ssn", "type": "string"}]},
    separators=(",", ":"),
)
USER_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "ssn", "type": "string"},
            {"name": "email", "type": ["null", "string"], "default": None},
        ],
    },
    separators=(",", ":"),
)
USER_INT_SSN = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "ssn", "type": "int"}]},
    separators=(",", ":"),
)
RULES = {
    "domainRules": [
        {
            "name": "checkSsnLen",
            "kind": "CONDITION",
            "type": "CEL",
            "mode": "WRITE",
            "expr": "size(message.ssn) == 9",
            "params": {"dlq.topic": "bad-users"},
            "onFailure": "DLQ",
        }
    ],
    "migrationRules": [],
}


def user_schema(text: str = USER_V1, major: str = "1") -> Schema:
    return Schema.from_dict(
        {
            "schema": text,
            "metadata": {"properties": {"application.major.version": major, "owner": "team-a"}},
            "ruleSet": RULES,
        }
    )


def client_for(server: RegistryServer | str | list[str], **options: Any) -> SchemaRegistryClient:
    """A client with tiny backoff and short timeouts, so fault tests stay fast."""
    url = server.url if isinstance(server, RegistryServer) else server
    settings: dict[str, Any] = {
        "max_retries": 2,
        "backoff_base": 0.001,
        "backoff_max": 0.005,
        "connect_timeout": 1.0,
        "read_timeout": 2.0,
    }
    return SchemaRegistryClient(url, **{**settings, **options})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- protocol round trips ----------------------------------------------------------------------


def test_register_sends_metadata_and_rule_set_and_get_schema_returns_them(
    registry_server: RegistryServer,
) -> None:
    client = client_for(registry_server)
    schema = user_schema()
    schema_id = client.register_schema("users-value", schema)

    posted = registry_server.requests[-1]
    assert (posted.method, posted.path) == ("POST", "/subjects/users-value/versions")
    assert posted.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert json.loads(posted.body) == schema.to_dict()
    fetched = client_for(registry_server).get_schema(schema_id)
    assert fetched == schema
    assert fetched.rules.domain_rules[0].name == "checkSsnLen"
    assert fetched.properties["application.major.version"] == "1"


def test_register_with_normalize_asks_the_registry_to_normalize(registry_server: RegistryServer) -> None:
    client_for(registry_server).register_schema("users-value", user_schema(), normalize=True)
    assert registry_server.requests[-1].query == {"normalize": ["true"]}


def test_versions_latest_and_numbered_versions(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    first = client.register_schema("users-value", user_schema(USER_V1, "1"))
    second = client.register_schema("users-value", user_schema(USER_V2, "2"))

    assert client.get_versions("users-value") == [1, 2]
    assert client.get_subjects() == ["users-value"]
    v1 = client.get_version("users-value", 1)
    assert (v1.subject, v1.version, v1.schema_id, v1.schema.schema_str) == ("users-value", 1, first, USER_V1)
    latest = client.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (2, second)
    assert client.get_version("users-value", "latest") == latest
    assert registry_server.requests[-1].path == "/subjects/users-value/versions/latest"


def test_latest_with_metadata_sends_key_value_pairs(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema(USER_V1, "1"))
    client.register_schema("users-value", user_schema(USER_V2, "2"))

    found = client.get_latest_with_metadata(
        "users-value", {"application.major.version": "1", "owner": "team-a"}
    )

    assert found.version == 1
    request = registry_server.requests[-1]
    assert request.path == "/subjects/users-value/metadata"
    assert request.query == {"key": ["application.major.version", "owner"], "value": ["1", "team-a"]}


def test_lookup_finds_the_version_holding_a_schema(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema(USER_V1, "1"))
    schema_id = client.register_schema("users-value", user_schema(USER_V2, "2"))

    found = client.lookup_schema("users-value", user_schema(USER_V2, "2"))

    assert (found.version, found.schema_id) == (2, schema_id)
    assert registry_server.requests[-1].path == "/subjects/users-value"
    with pytest.raises(RegistryError) as missing:
        client.lookup_schema("users-value", Schema('"string"'))
    assert (missing.value.status, missing.value.error_code) == (404, 40403)


def test_versions_carry_their_guid_and_a_guid_finds_its_schema(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema())
    version = client.get_version("users-value", 1)
    assert version.guid is not None
    assert client.lookup_schema("users-value", user_schema()).guid == version.guid

    fetched = client_for(registry_server).get_schema_by_guid(version.guid)

    assert fetched == user_schema()
    assert registry_server.requests[-1].path == f"/schemas/guids/{version.guid}"


def test_an_unknown_guid_is_confluent_40403(registry_server: RegistryServer) -> None:
    with pytest.raises(RegistryError) as missing:
        client_for(registry_server).get_schema_by_guid("00000000-0000-4000-8000-000000000000")
    assert (missing.value.status, missing.value.error_code) == (404, 40403)


def test_a_registry_without_guids_answers_versions_without_one(registry_server: RegistryServer) -> None:
    """Confluent Schema Registry before 8.0 answers no guid: the version has none, not an error."""
    answer = {"subject": "users-value", "version": 1, "id": 3, "schema": USER_V1}
    registry_server.inject(json_reply(200, answer))
    assert client_for(registry_server).get_version("users-value", 1).guid is None


def test_unknown_subject_is_confluent_40401(registry_server: RegistryServer) -> None:
    with pytest.raises(RegistryError, match="Subject 'nope' not found") as error:
        client_for(registry_server).get_latest_version("nope")
    assert (error.value.status, error.value.error_code) == (404, 40401)
    assert registry_server.count() == 1


def test_subject_names_are_percent_encoded(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    schema_id = client.register_schema("ctx/with space:users", user_schema())
    assert client.get_version("ctx/with space:users", 1).schema_id == schema_id
    assert client.get_subjects() == ["ctx/with space:users"]


def test_dot_subjects_address_themselves_not_another_resource(registry_server: RegistryServer) -> None:
    # URL normalization drops "." and ".." path segments: /subjects/./versions is /subjects/versions.
    client = client_for(registry_server)
    registry_server.registry.register_schema("versions", user_schema(USER_V1))
    dot = client.register_schema(".", user_schema(USER_V2))
    dots = client.register_schema("..", user_schema(USER_V2, major="2"))
    assert client.get_latest_version(".").schema_id == dot
    assert client.get_latest_version("..").schema_id == dots
    assert client.get_versions(".") == [1]
    assert sorted(registry_server.registry.get_subjects()) == [".", "..", "versions"]
    assert client.delete_subject("..") == [1]
    assert registry_server.registry.get_versions("versions") == [1]


def test_a_subject_that_is_not_unicode_text_is_a_registry_error(registry_server: RegistryServer) -> None:
    with pytest.raises(RegistryError, match="not Unicode text"):
        client_for(registry_server).get_versions("bad\ud800")
    assert registry_server.count() == 0


def test_config_round_trip_with_group_and_rule_sets(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    default_rules = {"domainRules": [{"name": "notEmpty", "type": "CEL", "expr": "size(message.ssn) > 0"}]}
    override = RuleSet.from_dict({"domainRules": [{"name": "always", "type": "CEL", "expr": "true"}]})

    answer = client.set_config(
        "users-value",
        compatibility="FULL",
        compatibilityGroup="application.major.version",
        defaultRuleSet=default_rules,
        overrideRuleSet=override,
        defaultMetadata=Metadata(properties={"owner": "team-a"}),
    )

    put, get = registry_server.requests
    assert (put.method, put.path) == ("PUT", "/config/users-value")
    assert json.loads(put.body)["overrideRuleSet"] == override.to_dict()
    assert (get.method, get.path, get.query) == ("GET", "/config/users-value", {"defaultToGlobal": ["true"]})
    assert answer == client.get_config("users-value")
    assert answer["compatibility"] == "FULL"
    assert answer["compatibilityGroup"] == "application.major.version"
    assert answer["defaultRuleSet"] == default_rules
    assert answer["overrideRuleSet"] == override.to_dict()
    assert answer["defaultMetadata"] == {"properties": {"owner": "team-a"}}


def test_config_level_is_compatibility_level_on_the_wire_and_compatibility_in_the_protocol(
    registry_server: RegistryServer,
) -> None:
    client = client_for(registry_server)
    assert client.set_config(compatibility="NONE")["compatibility"] == "NONE"
    assert client.get_config()["compatibility"] == "NONE"
    assert httpx.get(f"{registry_server.url}/config").json()["compatibilityLevel"] == "NONE"
    assert [r.path for r in registry_server.requests] == ["/config"] * 4


def test_subject_config_falls_back_to_the_global_one(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.set_config(compatibility="FORWARD")
    assert client.get_config("never-configured")["compatibility"] == "FORWARD"


def test_a_subjects_own_config_without_the_global_fallback(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.set_config(compatibility="FORWARD")
    client.set_config("grouped", compatibilityGroup="application.major.version")
    assert client.get_config("never-configured", default_to_global=False) == {}
    own = client.get_config("grouped", default_to_global=False)
    assert own == {"compatibilityGroup": "application.major.version"}
    query = registry_server.requests[-1].query
    assert query["defaultToGlobal"] == ["false"]


def test_delete_subject_returns_versions_and_forgets_cached_answers(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema())
    client.get_version("users-value", 1)
    client.get_latest_version("users-value")

    assert client.delete_subject("users-value") == [1]

    with pytest.raises(RegistryError) as gone:
        client.get_version("users-value", 1)
    assert gone.value.error_code == 40401
    with pytest.raises(RegistryError):
        client.get_latest_version("users-value")


def test_permanent_delete_follows_a_soft_delete(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema())
    with pytest.raises(RegistryError) as not_soft_deleted:
        client.delete_subject("users-value", permanent=True)
    assert not_soft_deleted.value.error_code == 40405

    assert client.delete_subject("users-value") == [1]
    assert client.delete_subject("users-value", permanent=True) == [1]

    request = registry_server.requests[-1]
    assert (request.method, request.path, request.query) == (
        "DELETE",
        "/subjects/users-value",
        {"permanent": ["true"]},
    )


def test_delete_version_soft_then_permanent(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema())
    client.register_schema("users-value", user_schema(major="2"))  # same Avro, new metadata
    client.get_version("users-value", 1)
    assert client.delete_version("users-value", 1) == 1
    with pytest.raises(RegistryError) as gone:
        client.get_version("users-value", 1)
    assert gone.value.error_code == 40402
    assert client.get_versions("users-value") == [2]
    assert client.delete_version("users-value", 1, permanent=True) == 1
    request = registry_server.requests[-1]
    assert (request.method, request.path, request.query) == (
        "DELETE",
        "/subjects/users-value/versions/1",
        {"permanent": ["true"]},
    )


def test_compatibility_check_returns_a_bool(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema(USER_V1))
    assert client.test_compatibility("users-value", user_schema(USER_V2)) is True
    assert registry_server.requests[-1].path == "/compatibility/subjects/users-value/versions/latest"
    assert client.test_compatibility("users-value", user_schema(USER_V2), version=1) is True
    assert registry_server.requests[-1].path == "/compatibility/subjects/users-value/versions/1"
    assert client.test_compatibility("users-value", Schema(USER_INT_SSN)) is False


def test_an_incompatible_schema_is_409_unless_in_another_compatibility_group(
    registry_server: RegistryServer,
) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema(USER_V1, "1"))
    with pytest.raises(RegistryError, match="incompatible") as error:
        client.register_schema("users-value", user_schema(USER_INT_SSN, "1"))
    assert (error.value.status, error.value.error_code) == (409, 409)
    assert registry_server.count("POST") == 2

    client.set_config("users-value", compatibilityGroup="application.major.version")
    client.register_schema("users-value", user_schema(USER_INT_SSN, "2"))
    assert client.get_versions("users-value") == [1, 2]


def test_a_bad_contract_from_the_registry_is_a_contract_error(registry_server: RegistryServer) -> None:
    body = {
        "subject": "users-value",
        "version": 3,
        "id": 7,
        "schema": USER_V1,
        "ruleSet": {"domainRules": [{"name": "broken", "type": "CEL", "mode": "SIDEWAYS"}]},
    }
    registry_server.inject(json_reply(200, body))
    with pytest.raises(ContractError) as error:
        client_for(registry_server).get_version("users-value", 3)
    assert (error.value.subject, error.value.version, error.value.rule) == ("users-value", 3, "broken")


# -- retries, failover and faults -----------------------------------------------------------------


def test_5xx_is_retried_until_the_registry_answers(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    registry_server.inject(*[error_reply(503, 50003, "Error while forwarding the request to the leader")] * 2)
    assert client.get_subjects() == []
    assert registry_server.count("GET", "/subjects") == 3


def test_429_is_retried(registry_server: RegistryServer) -> None:
    registry_server.inject(error_reply(429, 429, "Too Many Requests", ("Retry-After", "0")))
    assert client_for(registry_server).get_subjects() == []
    assert registry_server.count() == 2


def test_retries_are_bounded_and_the_last_error_is_kept(registry_server: RegistryServer) -> None:
    registry_server.inject(*[error_reply(500, 50001, "Error in the backend datastore")] * 5)
    with pytest.raises(RegistryError, match="backend datastore") as error:
        client_for(registry_server, max_retries=3).get_subjects()
    assert (error.value.status, error.value.error_code) == (500, 50001)
    assert registry_server.count() == 4


@pytest.mark.parametrize(
    "reply",
    [
        error_reply(422, 42201, "Invalid schema"),
        error_reply(409, 409, "Schema being registered is incompatible with an earlier schema"),
        error_reply(403, 40301, "User is denied operation Write on Subject: users-value"),
    ],
)
def test_other_4xx_fail_at_once(registry_server: RegistryServer, reply: Any) -> None:
    registry_server.inject(reply)
    with pytest.raises(RegistryError) as error:
        client_for(registry_server).register_schema("users-value", user_schema())
    assert error.value.status == reply.status
    assert error.value.error_code == json.loads(reply.body)["error_code"]
    assert registry_server.count() == 1


def test_a_read_timeout_is_retried(registry_server: RegistryServer) -> None:
    registry_server.inject(Stall(1.0))
    assert client_for(registry_server, read_timeout=0.2).get_subjects() == []
    assert registry_server.count() == 2


def test_read_timeouts_beyond_the_retries_are_a_registry_error(registry_server: RegistryServer) -> None:
    registry_server.inject(Stall(1.0), Stall(1.0))
    with pytest.raises(RegistryError, match="ReadTimeout") as error:
        client_for(registry_server, read_timeout=0.2, max_retries=1).get_subjects()
    assert error.value.status is None
    assert registry_server.url in str(error.value)
    assert registry_server.count() == 2


def test_a_dropped_connection_is_retried(registry_server: RegistryServer) -> None:
    registry_server.inject(Hangup())
    assert client_for(registry_server).get_subjects() == []
    assert registry_server.count() == 2


def test_connection_refused_fails_over_to_the_next_url(registry_server: RegistryServer) -> None:
    dead = unused_url()
    client = client_for(f"{dead}, {registry_server.url}")
    assert client.get_subjects() == []
    assert client.get_subjects() == []
    assert registry_server.count() == 2


def test_no_reachable_url_is_a_registry_error_naming_them() -> None:
    first, second = unused_url(), unused_url()
    with pytest.raises(RegistryError, match="could not reach") as error:
        client_for([first, second], max_retries=1).get_subjects()
    assert error.value.status is None
    assert first in str(error.value) and second in str(error.value)
    assert isinstance(error.value.__cause__, Exception)


def test_a_body_that_is_not_json_is_a_registry_error(registry_server: RegistryServer) -> None:
    registry_server.inject(malformed_reply(200))
    with pytest.raises(RegistryError, match="not JSON") as error:
        client_for(registry_server).get_subjects()
    assert error.value.status == 200


def test_a_gateway_page_instead_of_json_is_retried_then_reported(registry_server: RegistryServer) -> None:
    registry_server.inject(*[malformed_reply(502)] * 3)
    with pytest.raises(RegistryError, match="not JSON") as error:
        client_for(registry_server).get_subjects()
    assert error.value.status == 502
    assert registry_server.count() == 3


# -- hostile answers: deadlines, sizes, Retry-After, undecodable bodies ------------------------------


def bytes_sent(flood: Flood) -> int:
    """What the server wrote before the client hung up (it notices a moment later)."""
    waited = time.monotonic() + 5
    while not flood.sent and time.monotonic() < waited:
        time.sleep(0.01)
    return flood.sent[0]


@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers-and-body"])
def test_a_trickling_answer_ends_at_the_request_deadline(
    registry_server: RegistryServer, headers: bool
) -> None:
    # Each byte arrives well within the read timeout; only a deadline on the whole call stops it.
    for n in range(3):
        registry_server.registry.register_schema(f"users-value-{n}", user_schema())
    registry_server.inject(*[Trickle(0.1, headers=headers)] * 3)
    client = client_for(registry_server, read_timeout=1.0, request_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(RegistryError, match="within 1s") as error:
        client.get_subjects()
    assert time.monotonic() - started < 1.6
    assert error.value.status is None
    assert registry_server.url in str(error.value)


def test_the_deadline_covers_retries_and_their_backoff(registry_server: RegistryServer) -> None:
    registry_server.inject(*[error_reply(503, 50003, "busy")] * 50)
    # A deadline of several backoffs, long enough that a loaded machine still answers the first try.
    client = client_for(
        registry_server, max_retries=50, backoff_base=0.2, backoff_max=0.2, request_timeout=2.0
    )
    started = time.monotonic()
    with pytest.raises(RegistryError, match="busy") as error:
        client.get_subjects()
    assert time.monotonic() - started < 2.9
    assert error.value.status == 503
    assert registry_server.count() < 50


def test_a_retry_the_deadline_cuts_reports_the_registrys_last_answer(
    registry_server: RegistryServer,
) -> None:
    # The registry says it is busy, then stalls: its 503 is the failure, not our own cut-off.
    registry_server.inject(error_reply(503, 50003, "busy"), Stall(3.0))
    client = client_for(
        registry_server, read_timeout=5.0, request_timeout=1.0, backoff_base=0.01, backoff_max=0.01
    )
    with pytest.raises(RegistryError, match="busy") as error:
        client.get_subjects()
    assert error.value.status == 503
    assert error.value.error_code == 50003
    assert registry_server.count() == 2


def test_an_answer_declaring_more_than_the_size_cap_is_refused_unread(
    registry_server: RegistryServer,
) -> None:
    flood = Flood(300 * 1024 * 1024, declared=True)
    registry_server.inject(flood)
    with pytest.raises(RegistryError, match="larger than") as error:
        client_for(registry_server, max_response_bytes=1024 * 1024).get_subjects()
    assert error.value.status == 200
    assert registry_server.count() == 1
    assert bytes_sent(flood) < 300 * 1024 * 1024


def test_an_endless_answer_is_cut_at_the_size_cap_without_holding_it(registry_server: RegistryServer) -> None:
    flood = Flood(64 * 1024 * 1024, declared=False)
    registry_server.inject(flood)
    client = client_for(registry_server, max_response_bytes=1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(RegistryError, match="larger than"):
            client.get_subjects()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024
    assert registry_server.count() == 1
    assert bytes_sent(flood) < 64 * 1024 * 1024


def test_a_compressed_answer_counts_against_the_cap_once_decompressed(
    registry_server: RegistryServer,
) -> None:
    bomb = gzip.compress(b"[" + b" " * (8 * 1024 * 1024) + b"]")
    registry_server.inject(Reply(200, bomb, (("Content-Encoding", "gzip"),)))
    with pytest.raises(RegistryError, match="larger than"):
        client_for(registry_server, max_response_bytes=1024 * 1024).get_subjects()


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_in_seconds_is_honoured(registry_server: RegistryServer, status: int) -> None:
    registry_server.inject(error_reply(status, status * 100, "slow down", ("Retry-After", "1")))
    started = time.monotonic()
    assert client_for(registry_server, backoff_max=3.0).get_subjects() == []
    assert 1.0 <= time.monotonic() - started < 2.0
    assert registry_server.count() == 2


def test_retry_after_as_an_http_date_is_honoured(registry_server: RegistryServer) -> None:
    later = email.utils.formatdate(time.time() + 2, usegmt=True)
    registry_server.inject(error_reply(503, 50003, "busy", ("Retry-After", later)))
    started = time.monotonic()
    assert client_for(registry_server, backoff_max=3.0).get_subjects() == []
    assert 0.9 <= time.monotonic() - started < 3.0


def test_retry_after_is_capped_by_the_backoff_bound(registry_server: RegistryServer) -> None:
    registry_server.inject(error_reply(429, 42900, "slow down", ("Retry-After", "3600")))
    started = time.monotonic()
    assert client_for(registry_server, backoff_max=0.2).get_subjects() == []
    assert time.monotonic() - started < 1.0


def test_a_retry_after_beyond_the_deadline_fails_at_once(registry_server: RegistryServer) -> None:
    registry_server.inject(error_reply(503, 50003, "maintenance", ("Retry-After", "30")))
    started = time.monotonic()
    with pytest.raises(RegistryError, match="maintenance") as error:
        client_for(registry_server, backoff_max=60.0, request_timeout=2.0).get_subjects()
    assert time.monotonic() - started < 0.5
    assert (error.value.status, registry_server.count()) == (503, 1)


@pytest.mark.parametrize(
    ("reply", "call"),
    [
        (Reply(200, b"not gzip at all", (("Content-Encoding", "gzip"),)), "get_subjects"),
        (Reply(200, b"[" * 100_000 + b"]" * 100_000), "get_subjects"),
        (Reply(200, b"[1e999]"), "get_versions"),
        (Reply(200, b"[NaN]"), "get_versions"),
        (Reply(200, b"[" + b"9" * 5000 + b"]"), "get_versions"),
        (Reply(200, b"[true]"), "get_versions"),
        (Reply(200, b"[0]"), "get_versions"),
        (Reply(200, b'{"id": 1e999}'), "register"),
        (Reply(200, b'{"id": true}'), "register"),
        (Reply(200, b'{"id": 2147483648}'), "register"),
        (Reply(200, b'{"subject": "s", "version": 1e999, "id": 1, "schema": "\\"int\\""}'), "get_version"),
        (Reply(200, b'{"subject": "s", "version": 1, "id": 1.5, "schema": "\\"int\\""}'), "get_version"),
        (Reply(200, b"\xff\xfe\x00garbage"), "get_subjects"),
        (Reply(500, b"{" * 100_000), "get_subjects"),
    ],
)
def test_an_answer_that_cannot_be_decoded_is_a_registry_error(
    registry_server: RegistryServer, reply: Reply, call: str
) -> None:
    registry_server.inject(*[reply] * 3)
    client = client_for(registry_server)
    calls = {
        "get_subjects": client.get_subjects,
        "get_versions": lambda: client.get_versions("s"),
        "register": lambda: client.register_schema("s", user_schema()),
        "get_version": lambda: client.get_version("s", 1),
    }
    with pytest.raises(RegistryError):
        calls[call]()


@pytest.mark.parametrize(
    "setting",
    [
        {"backoff_base": -0.1},
        {"backoff_max": -1.0},
        {"backoff_base": float("nan")},
        {"connect_timeout": 0},
        {"read_timeout": -1.0},
        {"read_timeout": float("inf")},
        {"request_timeout": 0},
        {"max_retries": -1},
        {"max_retries": True},
        {"max_retries": 1.5},
        {"cache_ttl": -1.0},
        {"cache_max_entries": 0},
        {"max_response_bytes": 0},
    ],
)
def test_bad_settings_fail_at_construction(setting: dict[str, Any]) -> None:
    [(name, _)] = setting.items()
    with pytest.raises(ValueError, match=name):
        SchemaRegistryClient("http://127.0.0.1:1", **setting)


# -- caches -----------------------------------------------------------------------------------------


def test_schemas_by_id_and_numbered_versions_are_cached_forever(registry_server: RegistryServer) -> None:
    clock = FakeClock()
    client = client_for(registry_server, clock=clock)
    schema_id = client.register_schema("users-value", user_schema())
    registry_server.reset_log()

    client.get_schema(schema_id)
    client.get_version("users-value", 1)
    clock.now += 10_000
    assert client.get_schema(schema_id) == user_schema()
    assert client.get_version("users-value", 1).schema_id == schema_id
    assert registry_server.count() == 2


def test_register_and_lookup_answers_are_cached(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    schema_id = client.register_schema("users-value", user_schema())
    assert client.register_schema("users-value", user_schema()) == schema_id
    client.lookup_schema("users-value", user_schema())
    client.lookup_schema("users-value", user_schema())
    assert registry_server.count("POST") == 2


def test_latest_is_refetched_after_the_ttl(registry_server: RegistryServer) -> None:
    clock = FakeClock()
    client = client_for(registry_server, clock=clock, cache_ttl=60)
    client.register_schema("users-value", user_schema(USER_V1, "1"))
    assert client.get_latest_version("users-value").version == 1
    client.register_schema("users-value", user_schema(USER_V2, "2"))

    clock.now += 59
    assert client.get_latest_version("users-value").version == 1
    assert client.get_latest_with_metadata("users-value", {"owner": "team-a"}).version == 2
    clock.now += 1
    assert client.get_latest_version("users-value").version == 2
    assert registry_server.count("GET", "/subjects/users-value/versions/latest") == 2
    assert registry_server.count("GET", "/subjects/users-value/metadata") == 1


def test_latest_answers_fill_the_immutable_caches(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    schema_id = client.register_schema("users-value", user_schema())
    client.get_latest_version("users-value")
    registry_server.reset_log()
    client.get_schema(schema_id)
    client.get_version("users-value", 1)
    assert registry_server.count() == 0


def test_schemas_by_guid_are_cached_and_filled_by_version_answers(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    client.register_schema("users-value", user_schema(USER_V1, "1"))
    client.register_schema("users-value", user_schema(USER_V2, "2"))
    first = client_for(registry_server).get_version("users-value", 1).guid
    assert first is not None
    client.get_version("users-value", 2)
    second = client.get_version("users-value", 2).guid
    assert second is not None
    registry_server.reset_log()

    assert client.get_schema_by_guid(second) == user_schema(USER_V2, "2")
    assert client.get_schema_by_guid(first) == user_schema(USER_V1, "1")
    assert client.get_schema_by_guid(first) == user_schema(USER_V1, "1")
    assert registry_server.count("GET", f"/schemas/guids/{first}") == 1
    assert registry_server.count() == 1


def test_the_cache_is_bounded_least_recently_used_first(registry_server: RegistryServer) -> None:
    client = client_for(registry_server, cache_max_entries=2)
    ids = [
        client.register_schema(f"s{i}", Schema(json.dumps(kind)))
        for i, kind in enumerate(["int", "long", "string"])
    ]
    registry_server.reset_log()
    client.get_schema(ids[0])
    client.get_schema(ids[1])
    client.get_schema(ids[0])
    client.get_schema(ids[2])  # evicts ids[1], the least recently used
    client.get_schema(ids[0])
    assert registry_server.count() == 3
    client.get_schema(ids[1])
    assert registry_server.count() == 4


def test_concurrent_misses_for_one_key_make_one_request(registry_server: RegistryServer) -> None:
    client = client_for(registry_server)
    schema_id = client_for(registry_server).register_schema("users-value", user_schema())
    client.get_subjects()  # open the connection pool before the race
    registry_server.reset_log()
    registry_server.inject(Stall(0.3))
    start = threading.Barrier(8)
    results: list[Schema] = []

    def fetch() -> None:
        start.wait()
        results.append(client.get_schema(schema_id))

    threads = [threading.Thread(target=fetch) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == [user_schema()] * 8
    assert registry_server.count("GET", f"/schemas/ids/{schema_id}") == 1


def test_a_failed_load_is_not_cached(registry_server: RegistryServer) -> None:
    client = client_for(registry_server, max_retries=0)
    for _ in range(2):
        registry_server.inject(error_reply(500, 50001, "store down"))
        with pytest.raises(RegistryError, match="store down"):
            client.get_schema(99)
    assert registry_server.count() == 2


def test_a_closed_client_reopens_its_pool_when_used_again(registry_server: RegistryServer) -> None:
    with client_for(registry_server) as client:
        client.get_subjects()
    assert client.get_subjects() == []
    assert registry_server.count() == 2


# -- auth and secrets -------------------------------------------------------------------------------


def test_basic_auth_is_sent() -> None:
    with running_registry(LocalRegistry(), basic_auth=("key", SECRET)) as server:
        assert client_for(server, basic_auth=("key", SECRET)).get_subjects() == []
        assert server.requests[-1].headers["authorization"].startswith("Basic ")


def test_credentials_in_the_url_become_basic_auth() -> None:
    with running_registry(LocalRegistry(), basic_auth=("key", SECRET)) as server:
        url = server.url.replace("http://", "http://key:s3cr3t-p%40ss@")
        client = client_for(url)
        assert client.get_subjects() == []
        assert SECRET not in repr(client) and "s3cr3t" not in repr(client)


@pytest.mark.parametrize(
    "password",
    [*(f"s3cr3t{mark}p4ssw0rd" for mark in "/#?,@: "), "s3cr3t@:/#?,p4ssw0rd", "s3cr3t%2Fp4ssw0rd"],
)
def test_any_password_in_the_url_becomes_basic_auth_and_never_shows(
    password: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with running_registry(LocalRegistry(), basic_auth=("key", password.replace("%2F", "/"))) as server:
        url = server.url.replace("http://", f"http://key:{password}@")
        client = client_for(f"{url}, {url}")
        assert client.get_subjects() == []
        with pytest.raises(RegistryError) as not_found:
            client.get_schema(7)
    with pytest.raises(RegistryError) as unreachable:
        client_for(f"http://key:{password}@{unused_url()[7:]}", max_retries=0).get_subjects()
    shown = [repr(client), str(not_found.value), str(unreachable.value)]
    shown += [record.getMessage() for record in caplog.records]
    for text in shown:
        assert "s3cr3t" not in text and "p4ssw0rd" not in text, text


@pytest.mark.parametrize(
    "url",
    [
        "https://key:t0p-s3cret/x@",
        "https://key:t0p-s3cret/x@host:notaport",
        "ftp://key:t0p-s3cret@host",
        "https://key:t0p-s3cret@host, https://other:t0p-s3cret2@host2",
        "https://key:t0p-s3cret@ho st",
    ],
)
def test_a_bad_url_with_credentials_never_shows_them(url: str) -> None:
    with pytest.raises(ValueError) as error:
        SchemaRegistryClient(url)
    assert "t0p-s3cret" not in str(error.value) and "s3cret" not in str(error.value)


def test_wrong_credentials_are_401_and_not_retried() -> None:
    with running_registry(LocalRegistry(), basic_auth=("key", SECRET)) as server:
        with pytest.raises(RegistryError, match="Unauthorized") as error:
            client_for(server, basic_auth=("key", "wrong")).get_subjects()
        assert (error.value.status, error.value.error_code) == (401, 401)
        assert server.count() == 1


def test_bearer_token_is_sent_and_a_callable_is_asked_per_request() -> None:
    issued: list[str] = []

    def token() -> str:
        issued.append(SECRET)
        return SECRET

    with running_registry(LocalRegistry(), bearer_token=SECRET) as server:
        assert client_for(server, bearer_token=SECRET).get_subjects() == []
        client = client_for(server, bearer_token=token)
        client.get_subjects()
        client.get_subjects()
        assert server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
        assert len(issued) == 2


def test_secrets_never_show_in_repr_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with running_registry(LocalRegistry(), basic_auth=("key", SECRET)) as server:
        url = server.url.replace("http://", "http://key:s3cr3t-p%40ss@")
        client = client_for([unused_url(), url])
        server.inject(error_reply(503, 50003, "busy"))
        client.get_subjects()
        with pytest.raises(RegistryError) as not_found:
            client.get_schema(1)
    with pytest.raises(RegistryError) as unreachable:
        client_for(f"http://key:{SECRET}@{unused_url()[7:]}", max_retries=0).get_subjects()
    with pytest.raises(ValueError) as bad_url:
        SchemaRegistryClient(f"ftp://key:{SECRET}@host")

    shown = [repr(client), str(client), str(not_found.value), str(unreachable.value), str(bad_url.value)]
    shown += [record.getMessage() for record in caplog.records]
    assert any("unreachable" in line for line in shown), "the failover was logged"
    for text in shown:
        assert SECRET not in text and "s3cr3t" not in text


# -- pickling -----------------------------------------------------------------------------------------


def test_a_pickled_client_ships_neither_pool_nor_caches_and_still_works(
    registry_server: RegistryServer,
) -> None:
    client = client_for(registry_server, basic_auth=("key", SECRET))
    schema_id = client.register_schema("users-value", user_schema())
    client.get_schema(schema_id)

    payload = pickle.dumps(client)
    copy = pickle.loads(payload)
    registry_server.reset_log()

    assert b"httpx" not in payload and USER_V1.encode() not in payload
    assert copy.get_version("users-value", 1).schema_id == schema_id
    assert registry_server.count() == 1
    assert registry_server.requests[-1].headers["authorization"].startswith("Basic ")
    assert repr(copy) == repr(client)


# -- TLS ----------------------------------------------------------------------------------------------


def test_https_with_a_private_ca_bundle(tls_files: TlsFiles) -> None:
    with running_registry(LocalRegistry(), tls=tls_files.server_context()) as server:
        assert server.url.startswith("https://")
        assert client_for(server, verify=tls_files.ca).get_subjects() == []
        assert client_for(server, verify=False).get_subjects() == []
        with pytest.raises(RegistryError, match="CERTIFICATE_VERIFY_FAILED"):
            client_for(server, max_retries=0).get_subjects()


def test_mutual_tls_sends_the_client_certificate(tls_files: TlsFiles) -> None:
    with running_registry(LocalRegistry(), tls=tls_files.server_context(require_client_cert=True)) as server:
        assert client_for(server, verify=tls_files.ca, cert=tls_files.client).get_subjects() == []
        with pytest.raises(RegistryError, match="could not reach"):
            client_for(server, verify=tls_files.ca, max_retries=0).get_subjects()


@pytest.mark.parametrize("setting", [{"verify": "/nonexistent/ca.pem"}, {"cert": "/nonexistent/client.pem"}])
def test_tls_files_that_cannot_be_loaded_are_a_registry_error(setting: dict[str, Any]) -> None:
    with pytest.raises(RegistryError, match="TLS files"):
        client_for("https://127.0.0.1:1", **setting).get_subjects()
