"""`spark-contracts lint --protobuf-message NAME` checks a Protobuf subject's rules against the record
message NAME chooses, as `DataContract(protobuf_message=…)` and `apply --protobuf-message` read it;
subjects of other types lint as they are."""

from __future__ import annotations

import io
import json
from pathlib import Path

from registry_server import running_registry

from contracts import LocalRegistry
from contracts.cli.main import run

ORDERS = 'syntax = "proto3"; package acme; message Order { string id = 1; message Line { string sku = 1; } }'
LINE_RULE = {"name": "sku", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "message.sku != ''"}
USERS = {"type": "record", "name": "User", "fields": [{"name": "id", "type": "int"}]}


def cli(*argv: str) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), stdout=out, stderr=err)
    return status, out.getvalue().splitlines(), err.getvalue()


def write(root: Path, subject: str, payload: dict[str, object]) -> None:
    (root / subject).mkdir(parents=True)
    (root / subject / "1.json").write_text(json.dumps(payload))


def registry_dir(root: Path) -> Path:
    """A Protobuf subject whose rule reads the nested message's field, and an Avro subject."""
    rules = {"domainRules": [LINE_RULE]}
    write(root, "orders-value", {"schemaType": "PROTOBUF", "schema": ORDERS, "ruleSet": rules})
    write(root, "users-value", {"schemaType": "AVRO", "schema": json.dumps(USERS)})
    return root


def test_lint_checks_rules_against_the_chosen_message(tmp_path: Path) -> None:
    root = registry_dir(tmp_path)

    first = cli("lint", str(root))
    chosen = cli("lint", str(root), "--protobuf-message", "acme.Order.Line")

    status, out, _ = first
    assert status == 1 and len(out) == 1, out
    assert "subject=orders-value version=1 rule=sku" in out[0]
    assert "the expression reads field 'sku', which the schema lacks" in out[0]
    assert chosen == (0, [], "lint: no problems\n")  # the Avro subject is linted as it is


def test_lint_of_a_message_the_file_lacks_names_its_messages(tmp_path: Path) -> None:
    root = registry_dir(tmp_path)

    with running_registry(LocalRegistry(root)) as server:
        status, out, _ = cli("lint", "--registry", server.url, "--protobuf-message", "acme.Nope")

    assert status == 1 and len(out) == 1, out
    assert "subject=orders-value version=1 rule=- position=protobuf_message" in out[0]
    assert "declares no message 'acme.Nope'; its messages are acme.Order, acme.Order.Line" in out[0]
