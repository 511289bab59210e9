"""SchemaRegistryClient: the Registry protocol over Confluent Schema Registry's REST API, with httpx."""

from __future__ import annotations

import json
import logging
import math
import random
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import httpx

from contracts.bounded import BoundedCache
from contracts.codes import SCHEMA_NOT_FOUND, SUBJECT_CONFIG_NOT_FOUND, SUBJECT_NOT_FOUND, VERSION_NOT_FOUND
from contracts.errors import RegistryError
from contracts.model import RegisteredSchema, Schema
from contracts.registry import content_encoding, http_dek
from contracts.registry.cache import LoadingCache
from contracts.registry.dek import DEFAULT_ALGORITHM, Dek, Kek
from contracts.registry.guid import canonical_guid
from contracts.registry.http_answers import Answer, decoded, error_from, read_answer, retry_after
from contracts.registry.http_urls import api_path as _path
from contracts.registry.http_urls import split_urls
from contracts.registry.layout import is_id
from contracts.registry.transport import DeadlineTransport, deadline, environment_proxy

_log = logging.getLogger(__name__)

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"

# Connection-level failures: nothing reached the server, so the next base URL may do better.
_FAILOVER_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)

# What is rebuilt after unpickling instead of shipped to Spark executors.
_RUNTIME_STATE = ("_http", "_http_lock", "_preferred", "_by_id", "_by_subject", "_latest", "_missing")

# The answers that say a schema, subject or version is not there (as opposed to an outage): kept
# for `missing_cache_ttl` seconds, so frames naming an unknown id do not ask once per row.
_MISSING = frozenset({SCHEMA_NOT_FOUND, SUBJECT_NOT_FOUND, VERSION_NOT_FOUND})

_Caches = tuple[LoadingCache[Any], LoadingCache[Any], LoadingCache[Any], LoadingCache[RegistryError]]
_PROCESS_CACHES: BoundedCache[str, _Caches] = BoundedCache(64)
"""Each client's caches in this process, by the client's identity (which survives pickling): every
copy of one client a worker unpickles (one per task) shares them, so a worker asks once."""

BearerToken = str | Callable[[], str]


class SchemaRegistryClient:
    """A Confluent Schema Registry client satisfying the `Registry` protocol (docs/semantics.md §9.6).

    Immutable answers (a schema by id, a subject's numbered version, register and lookup
    results) are cached until the subject is deleted; "latest" answers for `cache_ttl` seconds;
    answers that a schema, subject or version is not there for `missing_cache_ttl` seconds (0: not
    kept), forgotten when this client registers a schema. Copies of one client in one process
    (Spark ships one to each task) share these caches.
    Transient failures (connection errors, timeouts, 5xx, 429) are retried with full-jitter
    exponential backoff, waiting as a Retry-After header asks within `backoff_max`; a connection
    error fails over to the next base URL. `connect_timeout` and `read_timeout` bound each network
    wait, `request_timeout` a whole call (retries and backoff included); an answer larger than
    `max_response_bytes` is refused. Picklable, so Spark can ship it to executors: the HTTP
    connection pool and caches are rebuilt there.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        basic_auth: tuple[str, str] | None = None,
        bearer_token: BearerToken | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        request_timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.1,
        backoff_max: float = 5.0,
        max_response_bytes: int = 32 * 1024 * 1024,
        cache_ttl: float = 300.0,
        cache_max_entries: int = 1000,
        missing_cache_ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        urls, url_auth = split_urls(url)
        if basic_auth is not None and url_auth is not None:
            raise ValueError("credentials given both in the URL and as basic_auth; give them once")
        basic_auth = basic_auth or url_auth
        if basic_auth is not None and bearer_token is not None:
            raise ValueError("give basic_auth or bearer_token, not both")
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("request_timeout", request_timeout),
        ):
            _check_seconds(name, value, zero_allowed=False)
        for name, value in (
            ("backoff_base", backoff_base),
            ("backoff_max", backoff_max),
            ("cache_ttl", cache_ttl),
            ("missing_cache_ttl", missing_cache_ttl),
        ):
            _check_seconds(name, value, zero_allowed=True)
        for name, value, least in (
            ("max_retries", max_retries, 0),
            ("max_response_bytes", max_response_bytes, 1),
            ("cache_max_entries", cache_max_entries, 1),
        ):
            _check_count(name, value, least)
        self._urls = urls
        self._basic_auth = basic_auth
        self._bearer_token = bearer_token
        self._verify = verify
        self._cert = cert
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._request_timeout = request_timeout
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_response_bytes = max_response_bytes
        self._cache_ttl = cache_ttl
        self._cache_max_entries = cache_max_entries
        self._missing_cache_ttl = missing_cache_ttl
        self._clock = clock
        self._identity = uuid.uuid4().hex
        self._start_runtime()

    def _start_runtime(self) -> None:
        self._http: httpx.Client | None = None
        self._http_lock = threading.Lock()
        self._preferred = 0
        caches = _PROCESS_CACHES.get_or_make(self._identity, self._new_caches)
        self._by_id, self._by_subject, self._latest, self._missing = caches

    def _new_caches(self) -> _Caches:
        size, clock = self._cache_max_entries, self._clock
        return (
            LoadingCache(size, None, clock),
            LoadingCache(size, None, clock),
            LoadingCache(size, self._cache_ttl, clock),
            LoadingCache(size, self._missing_cache_ttl, clock),
        )

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key not in _RUNTIME_STATE}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start_runtime()

    def __repr__(self) -> str:
        auth = "basic" if self._basic_auth else "bearer" if self._bearer_token else None
        return f"SchemaRegistryClient(url={list(self._urls)!r}, auth={auth!r})"

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool; the client reopens one if used again."""
        with self._http_lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    # -- the Registry protocol -------------------------------------------------------------

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        """Register `schema` under `subject` (metadata and ruleSet included); return its global id."""
        key = ("register", subject, _canonical(schema), normalize)
        schema_id = self._by_subject.get_or_load(key, lambda: self._register(subject, schema, normalize))
        self._missing.discard_if(lambda _: True)  # what was missing may be this schema
        return schema_id

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        """The version of `subject` holding exactly `schema`; RegistryError 40403 if none."""
        key = ("lookup", subject, _canonical(schema))
        return self._known(self._by_subject, key, lambda: self._lookup(subject, schema))

    def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id (cached: ids are immutable)."""
        return self._known(self._by_id, schema_id, lambda: self._fetch_schema(schema_id))

    def get_schema_by_guid(self, guid: str) -> Schema:
        """The schema with this GUID, GET /schemas/guids/{guid} (cached: GUIDs are immutable)."""
        return self._known(self._by_id, ("guid", guid), lambda: self._fetch_schema_by_guid(guid))

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        """One version of a subject, a number or "latest" (numbered versions are cached: immutable)."""
        number = _version_number(version)
        if number is None:
            return self.get_latest_version(subject)
        key = ("version", subject, number)
        return self._known(self._by_subject, key, lambda: self._fetch_version(subject, number))

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The newest version of a subject, cached for `cache_ttl` seconds."""
        return self._latest.get_or_load(("latest", subject), lambda: self._fetch_version(subject, "latest"))

    def get_latest_with_metadata(self, subject: str, metadata: dict[str, str]) -> RegisteredSchema:
        """The newest version whose metadata properties include all of `metadata`, cached for `cache_ttl`."""
        pairs = tuple(sorted(metadata.items()))
        key = ("metadata", subject, pairs)
        return self._latest.get_or_load(key, lambda: self._fetch_with_metadata(subject, pairs))

    def get_versions(self, subject: str) -> list[int]:
        """The version numbers of a subject, ascending (never cached: new versions appear)."""
        versions = self._request("GET", _path("subjects", subject, "versions"))
        if not isinstance(versions, list) or not all(is_id(v) for v in versions):
            raise _unexpected("GET /subjects/{subject}/versions", "a list of version numbers", versions)
        return sorted(versions)

    def get_subjects(self) -> list[str]:
        """Every subject with at least one live version (never cached)."""
        subjects = self._request("GET", "/subjects")
        if not isinstance(subjects, list) or not all(isinstance(s, str) for s in subjects):
            raise _unexpected("GET /subjects", "a list of subject names", subjects)
        return subjects

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Delete a subject (soft, or permanent after a soft delete); returns the versions deleted."""
        params = {"permanent": "true"} if permanent else None
        try:
            deleted = self._request("DELETE", _path("subjects", subject), params=params)
        finally:
            self._forget(subject)
        if not isinstance(deleted, list) or not all(is_id(v) for v in deleted):
            raise _unexpected("DELETE /subjects/{subject}", "a list of version numbers", deleted)
        return deleted

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        """Delete one version (soft, or permanent after a soft delete); returns its number."""
        params = {"permanent": "true"} if permanent else None
        try:
            deleted = self._request("DELETE", _path("subjects", subject, "versions", version), params=params)
        finally:
            self._forget(subject)
        call = "DELETE /subjects/{subject}/versions/{version}"
        if not is_id(deleted):
            raise _unexpected(call, "a version number", deleted)
        number = _version_number(version)
        if number is not None and deleted != number:
            raise _mismatch(call, f"subject {subject!r} version {number}", f"version {deleted}")
        return deleted

    def get_config(self, subject: str | None = None, default_to_global: bool = True) -> dict[str, Any]:
        """The global config, or the subject's effective config (falling back to the global one), or
        with `default_to_global=False` only the subject's own ({} when it has none: 40408)."""
        if subject is None:
            return self._config_answer(self._request("GET", "/config"))
        path = _path("config", subject)
        params = {"defaultToGlobal": "true" if default_to_global else "false"}
        try:
            return self._config_answer(self._request("GET", path, params=params))
        except RegistryError as e:
            if not default_to_global and e.error_code == SUBJECT_CONFIG_NOT_FOUND:
                return {}
            raise

    def set_config(self, subject: str | None = None, **config: Any) -> dict[str, Any]:
        """Update config keys (`compatibility`, `compatibilityGroup`, `defaultRuleSet`, …); returns the
        config now in effect (the PUT only echoes its request, so a GET follows)."""
        body = {key: _jsonable(value) for key, value in config.items()}
        self._request("PUT", "/config" if subject is None else _path("config", subject), body=body)
        return self.get_config(subject)

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        """Whether `schema` could be registered under `subject` against `version`, per its compatibility."""
        path = _path("compatibility", "subjects", subject, "versions", version)
        answer = self._request("POST", path, body=schema.to_dict())
        if not isinstance(answer, dict) or not isinstance(answer.get("is_compatible"), bool):
            raise _unexpected("POST /compatibility/…", "an object with is_compatible", answer)
        return answer["is_compatible"]

    # -- the DEK registry (contracts.registry.dek.DekRegistry), uncached: ENCRYPT caches per worker

    def register_kek(
        self,
        name: str,
        kms_type: str,
        kms_key_id: str,
        shared: bool = False,
        kms_props: Mapping[str, str] | None = None,
        doc: str | None = None,
        context: str | None = None,
    ) -> Kek:
        """POST /dek-registry/v1/keks: create a KEK."""
        return http_dek.register_kek(
            self._request, name, kms_type, kms_key_id, shared, kms_props, doc, context
        )

    def get_kek(self, name: str, deleted: bool = False, context: str | None = None) -> Kek:
        """GET /dek-registry/v1/keks/{name}; RegistryError 40470 if none."""
        return http_dek.get_kek(self._request, name, deleted, context)

    def register_dek(
        self,
        kek_name: str,
        subject: str,
        encrypted_key_material: str | None,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
    ) -> Dek:
        """POST /dek-registry/v1/keks/{name}/deks/{subject}: create a DEK version (wrapped, base64)."""
        return http_dek.register_dek(
            self._request, kek_name, subject, encrypted_key_material, algorithm, version
        )

    def get_dek(
        self,
        kek_name: str,
        subject: str,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
        deleted: bool = False,
    ) -> Dek:
        """GET /dek-registry/v1/keks/{name}/deks/{subject}/versions/{version} (-1: the newest)."""
        return http_dek.get_dek(self._request, kek_name, subject, algorithm, version, deleted)

    def _known(self, cache: LoadingCache[Any], key: Hashable, load: Callable[[], Any]) -> Any:
        """`cache`'s value for `key`, loaded once; an answer that it is not there (40401, 40402,
        40403) is kept for `missing_cache_ttl` seconds and raised again meanwhile, unasked."""
        missing = self._missing.get(key)
        if missing is not None:
            raise RegistryError(missing.reason, status=missing.status, error_code=missing.error_code)
        try:
            return cache.get_or_load(key, load)
        except RegistryError as error:
            if error.error_code in _MISSING:
                self._missing.put(key, error)
            raise

    # -- one REST call per protocol method ---------------------------------------------------

    def _register(self, subject: str, schema: Schema, normalize: bool) -> int:
        params = {"normalize": "true"} if normalize else None
        path = _path("subjects", subject, "versions")
        answer = self._request("POST", path, params=params, body=schema.to_dict())
        if not isinstance(answer, dict) or not is_id(answer.get("id")):
            raise _unexpected("POST /subjects/{subject}/versions", "an object with an id", answer)
        return answer["id"]

    def _lookup(self, subject: str, schema: Schema) -> RegisteredSchema:
        answer = self._request("POST", _path("subjects", subject), body=schema.to_dict())
        return self._registered("POST /subjects/{subject}", subject, answer)

    def _fetch_schema(self, schema_id: int) -> Schema:
        call = "GET /schemas/ids/{id}"
        answer = self._request("GET", _path("schemas", "ids", schema_id))
        if not isinstance(answer, dict):
            raise _unexpected(call, "a schema object", answer)
        # The answer need not carry the id (Confluent's does not); one that does must carry this one.
        if "id" in answer and answer["id"] != schema_id:
            raise _mismatch(call, f"schema id {schema_id}", f"schema id {answer['id']!r}")
        return _parsed(call, answer, lambda: Schema.from_dict(answer))

    def _fetch_schema_by_guid(self, guid: str) -> Schema:
        call = "GET /schemas/guids/{guid}"
        answer = self._request("GET", _path("schemas", "guids", guid))
        if not isinstance(answer, dict):
            raise _unexpected(call, "a schema object", answer)
        answered = answer.get("guid")
        if answered is not None and canonical_guid(str(answered)) != canonical_guid(guid):
            raise _mismatch(call, f"schema guid {guid}", f"schema guid {answered!r}")
        return _parsed(call, answer, lambda: Schema.from_dict(answer))

    def _fetch_version(self, subject: str, version: int | str) -> RegisteredSchema:
        answer = self._request("GET", _path("subjects", subject, "versions", version))
        number = version if isinstance(version, int) else None
        return self._registered("GET /subjects/{subject}/versions/{version}", subject, answer, number)

    def _fetch_with_metadata(self, subject: str, pairs: tuple[tuple[str, str], ...]) -> RegisteredSchema:
        # The API takes parallel repeated parameters: ?key=k1&value=v1&key=k2&value=v2.
        params = [(name, item) for key, value in pairs for name, item in (("key", key), ("value", value))]
        answer = self._request("GET", _path("subjects", subject, "metadata"), params=params)
        return self._registered("GET /subjects/{subject}/metadata", subject, answer)

    def _registered(
        self, call: str, subject: str, answer: Any, version: int | None = None
    ) -> RegisteredSchema:
        """Parse a version answer (a bad contract raises ContractError naming subject and version)
        and remember it under its immutable keys, the subject asked for included: its id and its
        (subject, version). An answer for another subject, or for another version than the
        numbered one asked for (`version`; None for the latest or a lookup), is a RegistryError
        naming both (docs/semantics.md §10.13)."""
        if not isinstance(answer, dict) or not is_id(answer.get("id")) or not is_id(answer.get("version")):
            raise _unexpected(call, "an object with an id and a version from 1 to 2147483647", answer)
        if answer.get("subject") != subject or (version is not None and answer["version"] != version):
            asked = f"subject {subject!r}" + ("" if version is None else f" version {version}")
            given = f"subject {answer.get('subject')!r} version {answer['version']}"
            raise _mismatch(call, asked, given)
        registered = _parsed(call, answer, lambda: RegisteredSchema.from_dict(answer))
        self._by_id.put(registered.schema_id, registered.schema)
        if registered.guid is not None:
            self._by_id.put(("guid", registered.guid), registered.schema)
        self._by_subject.put(("version", subject, registered.version), registered)
        return registered

    def _config_answer(self, answer: Any) -> dict[str, Any]:
        if not isinstance(answer, dict):
            raise _unexpected("GET /config", "a config object", answer)
        # GET names the level "compatibilityLevel" although PUT takes "compatibility"; the protocol
        # (and LocalRegistry) use "compatibility" both ways.
        if "compatibilityLevel" in answer:
            answer["compatibility"] = answer.pop("compatibilityLevel")
        return answer

    def _forget(self, subject: str) -> None:
        """Drop what a deleted subject made stale."""
        self._by_subject.discard_if(lambda key: _key_subject(key) == subject)
        self._latest.discard_if(lambda key: _key_subject(key) == subject)

    # -- transport: retries, failover, deadline, errors --------------------------------------

    def _request(
        self, method: str, path: str, *, params: Any = None, body: dict[str, Any] | None = None
    ) -> Any:
        """Send one API call, retrying transient failures until `request_timeout`; the decoded
        JSON answer or RegistryError."""
        call = f"{method} {path}"
        content = None if body is None else json.dumps(body).encode()
        ends = time.monotonic() + self._request_timeout
        failure: Answer | httpx.TransportError | None = None
        attempts = self._max_retries + 1
        made = 0
        for attempt in range(attempts):
            if attempt:
                wait = self._backoff(attempt - 1, failure)
                if time.monotonic() + wait >= ends:
                    break
                time.sleep(wait)
            made += 1
            try:
                with deadline(ends):
                    answer = self._send(method, path, params, content)
            except httpx.TransportError as error:
                _log.warning("%s failed (attempt %d of %d): %r", call, made, attempts, error)
                # A retry our own deadline cut short says less than the registry's last answer.
                if not (isinstance(failure, Answer) and time.monotonic() >= ends):
                    failure = error
                continue
            if not _retryable(answer.status):
                return decoded(call, answer)
            failure = answer
            _log.warning("%s answered %d (attempt %d of %d)", call, answer.status, made, attempts)
        if isinstance(failure, Answer):
            raise error_from(call, failure)
        where = ", ".join(self._urls)
        if time.monotonic() >= ends:
            message = (
                f"the schema registry at {where} did not answer {call} within {self._request_timeout:g}s"
            )
        else:
            message = f"could not reach the schema registry at {where} for {call}"
        raise RegistryError(
            f"{message} after {made} attempts: {type(failure).__name__}: {failure}"
        ) from failure

    def _send(self, method: str, path: str, params: Any, content: bytes | None) -> Answer:
        """One attempt: the preferred base URL first, failing over on connection errors; the answer
        read in full, within `max_response_bytes`."""
        client = self._client()
        headers = self._headers(content is not None)
        order = [(self._preferred + i) % len(self._urls) for i in range(len(self._urls))]

        def send_to(index: int) -> Answer:
            _log.debug("%s %s%s", method, self._urls[index], path)
            request = client.build_request(
                method, self._urls[index] + path, params=params, content=content, headers=headers
            )
            response = client.send(request, stream=True)
            self._preferred = index
            try:
                return read_answer(f"{method} {path}", response, self._max_response_bytes)
            finally:
                response.close()

        for index in order[:-1]:
            try:
                return send_to(index)
            except _FAILOVER_ERRORS as error:
                _log.warning("%s unreachable (%r); trying the next URL", self._urls[index], error)
        return send_to(order[-1])

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Content-Type": _CONTENT_TYPE} if has_body else {}
        if self._bearer_token is not None:
            token = self._bearer_token() if callable(self._bearer_token) else self._bearer_token
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _backoff(self, retry: int, failure: Answer | httpx.TransportError | None) -> float:
        """Full jitter, uniform in [0, min(max, base * 2**retry)] (spreads retrying clients apart),
        or longer when the answer's Retry-After asks for it; never more than `backoff_max`."""
        jitter = random.uniform(0.0, min(self._backoff_max, self._backoff_base * 2.0 ** min(retry, 64)))
        asked = retry_after(failure) if isinstance(failure, Answer) else None
        return jitter if asked is None else min(self._backoff_max, max(jitter, asked))

    def _client(self) -> httpx.Client:
        with self._http_lock:
            if self._http is None:
                tls = self._tls()
                proxies = {_origin(url): environment_proxy(url) for url in self._urls}
                self._http = httpx.Client(
                    auth=httpx.BasicAuth(*self._basic_auth) if self._basic_auth else None,
                    timeout=httpx.Timeout(self._read_timeout, connect=self._connect_timeout),
                    headers={"Accept": _ACCEPT, "Accept-Encoding": content_encoding.ACCEPT_ENCODING},
                    transport=DeadlineTransport(tls),
                    mounts={
                        origin: DeadlineTransport(tls, proxy) for origin, proxy in proxies.items() if proxy
                    },
                )
            return self._http

    def _tls(self) -> ssl.SSLContext:
        """TLS settings as one SSLContext (httpx 0.28 deprecates CA paths and `cert=`); a CA bundle
        or client certificate that cannot be loaded is a RegistryError."""
        try:
            context = ssl.create_default_context(
                cafile=self._verify if isinstance(self._verify, str) else None
            )
            if self._verify is False:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self._cert is not None:
                cert, key = (self._cert, None) if isinstance(self._cert, str) else self._cert
                context.load_cert_chain(cert, key)
        except OSError as error:  # ssl.SSLError is one too
            raise RegistryError(f"cannot load the TLS files (verify=, cert=): {error}") from error
        return context


def _check_seconds(name: str, value: object, *, zero_allowed: bool) -> None:
    """A setting in seconds: a finite number, above 0 (or at least 0 when `zero_allowed`)."""
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if number and (value > 0 or (zero_allowed and value == 0)):  # type: ignore[operator]
        return
    least = "0 or more" if zero_allowed else "above 0"
    raise ValueError(f"{name} must be a finite number of seconds, {least}; got {value!r}")


def _check_count(name: str, value: object, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{name} must be a whole number, {least} or more; got {value!r}")


def _origin(url: str) -> str:
    """`scheme://host[:port]` of a base URL: the key an httpx mount matches."""
    return "/".join(url.split("/", 3)[:3])


def _version_number(version: int | str) -> int | None:
    """A version as a number, or None for the latest (the API also accepts -1 for it)."""
    if version == "latest" or version == -1:
        return None
    try:
        return int(version)
    except (TypeError, ValueError):
        raise ValueError(f"a version is a number or 'latest', not {version!r}") from None


def _canonical(schema: Schema) -> str:
    """A hashable identity for a schema payload, for the register and lookup caches."""
    return json.dumps(schema.to_dict(), sort_keys=True, separators=(",", ":"))


def _key_subject(key: Hashable) -> object:
    return key[1] if isinstance(key, tuple) else None


def _jsonable(value: Any) -> Any:
    """Model objects (Metadata, RuleSet) as their registry JSON; anything else unchanged."""
    return value.to_dict() if hasattr(value, "to_dict") else value


def _retryable(status: int) -> bool:
    """5xx and 429 are transient; any other 4xx would fail the same way again."""
    return status == 429 or status >= 500


def _parsed(call: str, answer: Any, parse: Callable[[], Any]) -> Any:
    """What `parse` makes of an answer; a shape it cannot take (a list where a map goes, a huge
    number) is a RegistryError, while a contract it refuses stays a ContractError."""
    try:
        return parse()
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as error:
        raise _unexpected(call, f"a valid answer ({type(error).__name__}: {error})", answer) from error


def _mismatch(call: str, asked: str, answered: str) -> RegistryError:
    """An answer about something else than what was asked: trusting it would run another contract."""
    return RegistryError(f"the schema registry answered {call} for {asked} with {answered}")


def _unexpected(call: str, expected: str, answer: Any) -> RegistryError:
    return RegistryError(
        f"the schema registry answered {call} with {repr(answer)[:200]}; expected {expected}"
    )
