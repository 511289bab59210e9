"""`spark-contracts lint`: every problem that loading a contract would hit, all reported in one run.

Each version is parsed by the model, its schema by the loader and each rule compiled by the
loader for every mode it runs in, so lint finds exactly what `DataContract` would — but one rule
at a time, so a bad rule does not hide the next one. Each version's schema is also checked against
the earlier ones of its subject under the subject's compatibility level, as registering it is.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

from contracts.errors import ContractError, DataContractError
from contracts.model import Rule, RuleMode, Schema
from contracts.planning import loader, migration
from contracts.planning.plan import build_plan
from contracts.planning.planner import ContractPlanner
from contracts.plugins import ACTION_GROUP, EXECUTOR_GROUP, PluginRegistry, load_group
from contracts.registry import LocalRegistry, Registry
from contracts.registry.checkers import UnreadableSchema, checker_for, incompatibilities
from contracts.registry.compatibility import Compatibility, checked_against, compatibility_level
from contracts.registry.layout import SUBJECT_FILE, subject_of, version_of
from contracts.registry.local_dek import DEK_DIRECTORY
from executors import as_executor

_CONFIG_FILE = "config.json"
_MALFORMED = object()  # what _read_json answers for a file that is not JSON (`null` is JSON)
_RULE_LISTS = ("migrationRules", "domainRules", "encodingRules")
# Domain and encoding rules run in WRITE and READ, migration rules in UPGRADE and DOWNGRADE
# (docs/semantics.md §2, §11.5).
_MODES = (
    ("domain_rules", (RuleMode.WRITE, RuleMode.READ)),
    ("migration_rules", (RuleMode.UPGRADE, RuleMode.DOWNGRADE)),
    ("encoding_rules", (RuleMode.WRITE, RuleMode.READ)),
)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a contract: where (file, subject, version, rule, position) and why.
    A `note` is worth saying but is no problem (a rule set left to the server): it does not fail lint."""

    reason: str
    subject: str | None = None
    version: int | None = None
    rule: str | None = None
    position: str | int | None = None
    path: str | None = None
    note: bool = False

    @classmethod
    def of(cls, error: ContractError, path: str | None = None) -> Problem:
        return cls(error.reason, error.subject, error.version, error.rule, error.position, path)

    def line(self) -> str:
        """The problem on one line: `[file: ]subject=S version=V rule=R position=P: reason`."""
        fields = " ".join(
            f"{label}={'-' if value is None else value}"
            for label, value in (
                ("subject", self.subject),
                ("version", self.version),
                ("rule", self.rule),
                ("position", self.position),
            )
        )
        where = f"{self.path}: {fields}" if self.path else fields
        return f"{where}: {'note: ' if self.note else ''}{self.reason}"


def lint_directory(root: Path, protobuf_message: str | None = None) -> list[Problem]:
    """Problems in a LocalRegistry directory (`<root>/<subject>/<version>.json`), Protobuf versions
    read with `protobuf_message` as their record message (as in `lint_registry`).

    Files that do not parse are reported with their path; the rest are staged in a scratch copy and
    opened with LocalRegistry itself, so ids, references and schemas are judged as loading judges
    them.
    """
    if not root.is_dir():
        return [Problem(f"{root} is not a directory", path=str(root))]
    problems: list[Problem] = []
    with tempfile.TemporaryDirectory(prefix="spark-contracts-lint-") as staging:
        staged: dict[tuple[str, int], Path] = {}
        originals: dict[tuple[str, int], str] = {}
        for path, subject, version in _layout(root, problems):
            payload = _read_json(path, subject, version, problems)
            if payload is _MALFORMED:
                continue
            if version is None and not isinstance(payload, dict):
                problems.append(
                    Problem("a config file must hold a JSON object", subject or None, path=str(path))
                )
                continue
            if version is not None:
                payload = _checked_version(payload, subject, version, str(path), problems)
                if payload is None:
                    continue
                originals[(subject, version)] = str(path)
            target = Path(staging) / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(payload), encoding="utf-8")
            if version is not None:
                staged[(subject, version)] = target
        keys = root / DEK_DIRECTORY
        if keys.is_dir():
            # ENCRYPT rules' KEKs, for lint to look at (it never changes them).
            shutil.copytree(keys, Path(staging) / DEK_DIRECTORY)
        registry = _open_dropping_bad_versions(Path(staging), staged, originals, problems)
        if registry is not None:
            problems.extend(lint_registry(registry, paths=originals, protobuf_message=protobuf_message))
    return sorted(_unique(problems), key=lambda p: (p.subject or "", p.version or 0))


def lint_registry(
    registry: Registry,
    subjects: Iterable[str] | None = None,
    paths: dict[tuple[str, int], str] | None = None,
    protobuf_message: str | None = None,
) -> list[Problem]:
    """Problems in the given subjects (default: all) of any registry, every version of each; a
    Protobuf version's rules checked against the record message `protobuf_message` names (as
    DataContract(protobuf_message=…) reads it; default: the file's first), other types as they are."""
    executors = load_group(EXECUTOR_GROUP, attrgetter("type"), as_executor)
    actions = load_group(ACTION_GROUP, attrgetter("name"))
    problems: list[Problem] = []
    for subject in registry.get_subjects() if subjects is None else subjects:
        try:
            versions = registry.get_versions(subject)
        except DataContractError as error:
            problems.append(_problem(error, subject, None))
            continue
        compared: list[_Compared] = []
        for version in versions:
            path = (paths or {}).get((subject, version))
            try:
                registered = registry.get_version(subject, version)
            except DataContractError as error:
                problems.append(_problem(error, subject, version, path))
                continue
            message = protobuf_message if registered.schema.schema_type.upper() == "PROTOBUF" else None
            try:
                target = loader.load_version(registry, registered, message)
            except DataContractError as error:
                problems.append(_problem(error, subject, version, path))
                schema_type = registered.schema.schema_type.upper()
                compared.append(_Compared(version, registered.schema.properties, schema_type, None, path))
                continue
            readable = _readable(target, problems, path)
            compared.append(
                _Compared(version, target.properties, target.schema.schema_type.upper(), readable, path)
            )
            problems.extend(
                Problem.of(error, path)
                for error in _rule_errors(registry, target, executors, actions, message)
            )
            problems.extend(_skipped_rule_set(target, path))
        problems.extend(_incompatibilities(registry, subject, compared))
    return _unique(problems)


@dataclass(frozen=True)
class _Compared:
    """A version as the compatibility check sees it: its metadata properties (for the
    compatibilityGroup), its schema type and what that type's checker reads (parsed Avro, a JSON
    Schema document, a compiled Protobuf schema), None when it did not load (reported already)."""

    version: int
    properties: dict[str, str]
    schema_type: str
    readable: Any | None
    path: str | None


def _readable(target: loader.ContractVersion, problems: list[Problem], path: str | None) -> Any | None:
    """The version's schema as its type's compatibility check reads it, by the registry's own
    dispatch (contracts/registry/checkers.py); None for a type without a check or, with a problem,
    a schema the check cannot read."""
    checker = checker_for(target.schema.schema_type)
    if checker is None:
        return None
    references = target.named_schemas if checker.reads_references else ()
    try:
        return checker.read(target.schema.schema_str, references)
    except UnreadableSchema as error:
        details = error.details
        if error.reference is not None:
            details = f"reference {references[error.reference].name!r}: {details}"
        reason = f"the compatibility check cannot read the schema: {details}"
        problems.append(Problem(reason, target.subject, target.version, position="schema", path=path))
        return None


def _compatibility_errors(level: Compatibility, new: _Compared, old: _Compared) -> list[str]:
    """Why `new` breaks `level` against `old`, as the registry would decide on registering it."""
    try:
        return incompatibilities(level, new.schema_type, new.readable, [(old.schema_type, old.readable)])
    except UnreadableSchema as error:
        return [f"the compatibility check cannot read the schemas: {error.details}"]


def _incompatibilities(registry: Registry, subject: str, compared: list[_Compared]) -> list[Problem]:
    """Each version against the earlier ones its subject's compatibility level (falling back to the
    global one) checks it against, as registering it would; a pair with a version that did not
    load (reported already) is skipped."""
    if len(compared) < 2:
        return []
    try:
        config = registry.get_config(subject)
    except DataContractError as error:
        return [_problem(error, subject, None)]
    try:
        level = compatibility_level(config)
    except ValueError:
        reason = f"unknown compatibility level {config.get('compatibility')!r}"
        return [Problem(reason, subject, position="compatibility")]
    problems: list[Problem] = []
    for index, new in enumerate(compared):
        for old in checked_against(level, config.get("compatibilityGroup"), new, compared[:index]):
            if new.readable is None or old.readable is None:
                continue
            problems.extend(
                Problem(
                    f"incompatible with version {old.version} under {level.value}: {message}",
                    subject,
                    new.version,
                    position="schema",
                    path=new.path,
                )
                for message in _compatibility_errors(level, new, old)
            )
    return problems


def _skipped_rule_set(target: loader.ContractVersion, path: str | None) -> list[Problem]:
    """A rule set whose `enableAt` leaves it to the server: the engine runs none of its rules."""
    rule_set = target.schema.rules
    count = len(rule_set.migration_rules) + len(rule_set.domain_rules) + len(rule_set.encoding_rules)
    if rule_set.runs_on_client or not count:
        return []
    reason = (
        f"ruleSet.enableAt is {rule_set.enable_at!r}: clients skip this rule set, so the engine runs"
        f" none of its {count} rules"
    )
    return [Problem(reason, target.subject, target.version, position="enableAt", path=path, note=True)]


def _rule_errors(
    registry: Registry,
    target: loader.ContractVersion,
    executors: PluginRegistry[Any],
    actions: PluginRegistry[Any],
    protobuf_message: str | None = None,
) -> Iterator[ContractError]:
    """Compile each rule, one at a time, in each mode it runs in, through the loader and planner,
    read-only: nothing is created in the registry."""
    compiler = ContractPlanner(
        registry, target.subject, target, executors, actions, protobuf_message=protobuf_message
    )
    for attribute, modes in _MODES:
        for mode in modes:
            rules = loader.running_order(getattr(target.schema.rules, attribute), mode, executors)
            for rule, record in zip(rules, _received(compiler, target, mode, rules), strict=True):
                try:
                    # Read-only: the registry is asked (an ENCRYPT rule's KEK), never changed.
                    compiled = loader.compile_rules(
                        target, mode, [rule], executors, record=record, registry=registry, lint=True
                    )
                    build_plan(
                        target.subject,
                        target.version,
                        mode,
                        target.spark_type,
                        compiled,
                        compiler.resolve_action,
                    )
                except ContractError as error:
                    yield error
                    continue
                if compiled[0][1] is None:
                    # Not a load failure: the rule fails every record (docs/semantics.md §2.1):
                    # surely a mistake.
                    yield ContractError(
                        f"no executor for rule type {rule.type!r} (known: {', '.join(executors.names())}):"
                        " the rule would fail every record",
                        subject=target.subject,
                        version=target.version,
                        rule=rule.name,
                        position="type",
                    )


def _received(
    compiler: ContractPlanner, target: loader.ContractVersion, mode: RuleMode, rules: list[Rule]
) -> list[loader.ContractVersion | None]:
    """The version whose record each rule receives (None: its own): a migration rule's, in a
    migration between its version and the one below, when that one exists (versions count from 1:
    a first version's rules receive its own record, and no registry is asked for a version 0)."""
    if not mode.is_migration or target.version <= 1:
        return [None] * len(rules)
    try:
        below = compiler.load(target.version - 1)
    except DataContractError:
        return [None] * len(rules)
    versions = {below.version: below, target.version: target}
    writer = below.version if mode is RuleMode.UPGRADE else target.version
    return list(migration.received_records(versions, writer, [(target, mode, rules)])[0])


def _layout(root: Path, problems: list[Problem]) -> Iterator[tuple[Path, str, int | None]]:
    """Every JSON file LocalRegistry reads, as (path, subject, version or None for a config)."""
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.name == _CONFIG_FILE:
            yield entry, "", None
        if not entry.is_dir():
            continue
        try:
            subject = subject_of(entry)
        except ContractError as error:
            problems.append(Problem.of(error, str(entry)))
            continue
        for path in sorted(entry.iterdir()):
            if path.name.startswith(".") or not path.name.endswith(".json") or not path.is_file():
                continue
            if path.name == _CONFIG_FILE:
                yield path, subject, None
            elif path.name != SUBJECT_FILE:
                try:
                    version = version_of(path, subject)
                except ContractError as error:
                    problems.append(Problem.of(error, str(path)))
                    continue
                yield path, subject, version


def _read_json(path: Path, subject: str, version: int | None, problems: list[Problem]) -> Any:
    """The file's JSON, or _MALFORMED (and a problem naming the file) when it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        problems.append(Problem(f"malformed JSON: {error}", subject or None, version, path=str(path)))
        return _MALFORMED


def _checked_version(
    payload: Any, subject: str, version: int, path: str, problems: list[Problem]
) -> dict[str, Any] | None:
    """Record what the model rejects in one version file (the first error, then every bad rule);
    the payload to go on with — without its bad rules, so the good ones still get compiled — or
    None when even that does not parse."""
    if not isinstance(payload, dict):
        problems.append(Problem("a version file must hold a JSON object", subject, version, path=path))
        return None
    try:
        _parse(payload, subject, version)
        return payload
    except ContractError as error:
        problems.append(Problem.of(error, path))
    rule_set = payload.get("ruleSet")
    if not isinstance(rule_set, dict):
        return None
    kept: dict[str, Any] = dict(rule_set)
    for key in _RULE_LISTS:
        rules = rule_set.get(key)
        if not isinstance(rules, list):
            continue
        kept[key] = []
        for item in rules:
            try:
                Rule.from_dict(item, subject=subject, version=version)
            except ContractError as error:
                problems.append(Problem.of(error, path))
            else:
                kept[key].append(item)
    remaining = {**payload, "ruleSet": kept}
    try:
        _parse(remaining, subject, version)
    except ContractError:
        return None
    return remaining


def _parse(payload: dict[str, Any], subject: str, version: int) -> Schema:
    """The version as LocalRegistry's loader parses it (its bookkeeping keys aside)."""
    body = {key: value for key, value in payload.items() if key not in ("id", "deleted")}
    return Schema.from_dict(body, subject=subject, version=version)


def _open_dropping_bad_versions(
    staging: Path,
    staged: dict[tuple[str, int], Path],
    originals: dict[tuple[str, int], str],
    problems: list[Problem],
) -> LocalRegistry | None:
    """LocalRegistry over the staged files; a version it refuses is reported and left out, and the
    rest opened again (each retry drops one file, so this ends)."""
    while True:
        try:
            return LocalRegistry(staging)
        except ContractError as error:
            key = (error.subject or "", error.version or 0)
            problems.append(Problem.of(error, originals.get(key)))
            if key not in staged:
                return None
            staged.pop(key).unlink()


def _problem(error: DataContractError, subject: str, version: int | None, path: str | None = None) -> Problem:
    if isinstance(error, ContractError):
        problem = Problem.of(error, path)
        return Problem(
            problem.reason,
            problem.subject or subject,
            problem.version if problem.version is not None else version,
            problem.rule,
            problem.position,
            path,
        )
    return Problem(str(error), subject, version, path=path)


def _unique(problems: list[Problem]) -> list[Problem]:
    """Each problem once (a rule that runs in WRITE and READ fails the same way in both)."""
    return list(dict.fromkeys(problems))
