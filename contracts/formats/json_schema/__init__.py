"""The JSON schema type: JSON Schema documents, Spark types for their records, UTF-8 JSON bodies."""

from contracts.formats.json_schema.format import JsonSchemaFormat, validate
from contracts.formats.json_schema.types import JsonSchema, Shape, parse_json_schema

__all__ = ["JsonSchema", "JsonSchemaFormat", "Shape", "parse_json_schema", "validate"]
