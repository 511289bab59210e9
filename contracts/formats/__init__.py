"""Schema formats by the registry's `schemaType`: the seam between the engine and a format.

`get("AVRO")` gives the format that reads a schema type; a new one is a sub-package implementing
`SchemaFormat` (contracts/formats/protocol.py) plus a registration: `register(MyFormat())`, or for
every process the entry-point group `spark_data_contracts.formats` (docs/plugins.md).
"""

from __future__ import annotations

from contracts import plugins
from contracts.errors import ContractError
from contracts.formats.avro.format import AvroFormat
from contracts.formats.json_schema import JsonSchemaFormat
from contracts.formats.protobuf import ProtobufFormat
from contracts.formats.protocol import Records, SchemaFormat
from contracts.plugins import FORMAT_GROUP

_BUILTINS: dict[str, SchemaFormat] = {
    builtin.schema_type: builtin for builtin in (AvroFormat(), JsonSchemaFormat(), ProtobufFormat())
}
"""The built-in formats, under those installed as plugins or registered (`contracts.plugins.FORMATS`)."""


def register(schema_format: SchemaFormat) -> None:
    """Make `schema_format` the one that reads its `schema_type`, in this process."""
    if not isinstance(schema_format, SchemaFormat):
        raise TypeError(f"{schema_format!r} does not implement SchemaFormat (contracts.formats.protocol)")
    plugins.FORMATS.register(schema_format)


def get(schema_type: str) -> SchemaFormat:
    """The format of `schema_type` (case-insensitive); ContractError naming the known ones if none."""
    found: SchemaFormat | None = plugins.FORMATS.find(schema_type)
    if found is None:
        found = _BUILTINS.get(schema_type.upper())
    if found is None:
        raise ContractError(f"schema type {schema_type} is not supported (known: {', '.join(known())})")
    return found


def known() -> list[str]:
    """The schema types a format is registered for."""
    return sorted({name.upper() for name in [*_BUILTINS, *plugins.FORMATS.names()]})


__all__ = ["FORMAT_GROUP", "Records", "SchemaFormat", "get", "known", "register"]
