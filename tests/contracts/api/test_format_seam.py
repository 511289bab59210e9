"""The format seam (docs/architecture.md): a contract's parsed schema is `parsed` whatever its format
(`avro_schema` a deprecated alias), and the field rules reach fields through the format's walk,
so a format without one refuses them at load, naming the protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts import DataContract, LocalRegistry, Schema, formats
from contracts.errors import ContractError
from contracts.formats.fields import FieldWalking
from contracts.formats.protocol import choose_record, clear_length, display_name
from contracts.model import Rule, RuleKind, RuleMode
from executors.cel_field import CelFieldExecutor
from executors.encrypt import EncryptExecutor
from executors.protocol import RuleContext

pytestmark = pytest.mark.one_pass

SCHEMA = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}


def test_parsed_is_every_formats_schema_and_avro_schema_a_deprecated_alias() -> None:
    registry = LocalRegistry()
    registry.register_schema("u-value", Schema.from_dict({"schema": json.dumps(SCHEMA)}))
    contract = DataContract(registry, "u-value")
    assert contract.parsed is contract.target.parsed
    with pytest.warns(DeprecationWarning, match="use DataContract.parsed"):
        assert contract.avro_schema is contract.parsed


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON", "PROTOBUF"])
def test_the_built_in_formats_walk_their_fields(schema_type: str) -> None:
    assert isinstance(formats.get(schema_type), FieldWalking)


class _Walkless:
    """A format with the required members only (what the field rules need is missing)."""

    schema_type = "WALKLESS"

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


@pytest.mark.parametrize("executor", [CelFieldExecutor(), EncryptExecutor()])
def test_field_rules_on_a_format_without_a_walk_fail_at_load(executor: Any) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    rule = Rule("r", RuleKind.TRANSFORM, RuleMode.WRITE, executor.type, "value", ("PII",))
    spark_type = StructType([StructField("name", StringType())])
    ctx = RuleContext(rule, "w-value", 1, RuleMode.WRITE, {}, spark_type, _Walkless())  # type: ignore[arg-type]
    with pytest.raises(ContractError, match="its format has no field walk") as refused:
        executor.compile(ctx)
    assert refused.value.position == "type"


def test_optional_format_members_and_their_defaults() -> None:
    avro, protobuf, json_schema = (formats.get(name) for name in ("AVRO", "PROTOBUF", "JSON"))
    assert (display_name(avro), display_name(json_schema)) == ("Avro", "JSON")
    assert clear_length(protobuf, b"\x02\x02rest") == 2 and clear_length(avro, b"\x02\x02rest") == 0
    assert choose_record(protobuf, "acme.Refund").message == "acme.Refund"  # type: ignore[attr-defined]
    with pytest.raises(ContractError, match="this schema is JSON"):
        choose_record(json_schema, "acme.Refund")
