"""Schema formats by the registry's `schemaType`: the seam between the engine and a format.

`get("AVRO")` gives the format that reads a schema type; a new one is a sub-package implementing
`SchemaFormat` (contracts/formats/protocol.py) plus a registration: `register(MyFormat())`, or for
every process the entry-point group `spark_data_contracts.formats` (docs/plugins.md).
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points

from contracts.errors import ContractError
from contracts.formats.avro.format import AvroFormat
from contracts.formats.json_schema import JsonSchemaFormat
from contracts.formats.protobuf import ProtobufFormat
from contracts.formats.protocol import Records, SchemaFormat

FORMAT_GROUP = "spark_data_contracts.formats"

_FORMATS: dict[str, SchemaFormat] = {
    "AVRO": AvroFormat(),
    "JSON": JsonSchemaFormat(),
    "PROTOBUF": ProtobufFormat(),
}
_LOADED = threading.Event()
_LOCK = threading.Lock()


def register(schema_format: SchemaFormat) -> None:
    """Make `schema_format` the one that reads its `schema_type`, in this process."""
    if not isinstance(schema_format, SchemaFormat):
        raise TypeError(f"{schema_format!r} does not implement SchemaFormat (contracts.formats.protocol)")
    with _LOCK:
        _FORMATS[schema_format.schema_type.upper()] = schema_format


def get(schema_type: str) -> SchemaFormat:
    """The format of `schema_type` (case-insensitive); ContractError naming the known ones if none."""
    _load_entry_points()
    found = _FORMATS.get(schema_type.upper())
    if found is None:
        raise ContractError(f"schema type {schema_type} is not supported (known: {', '.join(known())})")
    return found


def known() -> list[str]:
    """The schema types a format is registered for."""
    _load_entry_points()
    return sorted(_FORMATS)


def _load_entry_points() -> None:
    """Formats installed as plugins, registered once per process (the built-in ones win no ties:
    a plugin may replace one)."""
    if _LOADED.is_set():
        return
    with _LOCK:
        if _LOADED.is_set():
            return
        plugins = [entry.load() for entry in entry_points(group=FORMAT_GROUP)]
        _LOADED.set()
    for plugin in plugins:
        register(plugin() if isinstance(plugin, type) else plugin)


__all__ = ["FORMAT_GROUP", "Records", "SchemaFormat", "get", "known", "register"]
