"""The differences the JSON Schema diff finds: their kinds (Confluent's `Difference.Type`), the
kinds a reader reads through, and one difference at its JSON path."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JsonSchema = Mapping[str, Any] | bool


"""A JSON Schema document as JSON data: an object, or true/false."""


class Change(enum.Enum):
    """A kind of difference between a writer and a reader schema (Confluent's `Difference.Type`)."""

    ID_CHANGED = enum.auto()
    DESCRIPTION_CHANGED = enum.auto()
    TITLE_CHANGED = enum.auto()
    DEFAULT_CHANGED = enum.auto()
    SCHEMA_ADDED = enum.auto()
    SCHEMA_REMOVED = enum.auto()
    TYPE_EXTENDED = enum.auto()
    TYPE_NARROWED = enum.auto()
    TYPE_CHANGED = enum.auto()

    MAX_LENGTH_ADDED = enum.auto()
    MAX_LENGTH_REMOVED = enum.auto()
    MAX_LENGTH_INCREASED = enum.auto()
    MAX_LENGTH_DECREASED = enum.auto()
    MIN_LENGTH_ADDED = enum.auto()
    MIN_LENGTH_REMOVED = enum.auto()
    MIN_LENGTH_INCREASED = enum.auto()
    MIN_LENGTH_DECREASED = enum.auto()
    PATTERN_ADDED = enum.auto()
    PATTERN_REMOVED = enum.auto()
    PATTERN_CHANGED = enum.auto()

    MAXIMUM_ADDED = enum.auto()
    MAXIMUM_REMOVED = enum.auto()
    MAXIMUM_INCREASED = enum.auto()
    MAXIMUM_DECREASED = enum.auto()
    MINIMUM_ADDED = enum.auto()
    MINIMUM_REMOVED = enum.auto()
    MINIMUM_INCREASED = enum.auto()
    MINIMUM_DECREASED = enum.auto()
    EXCLUSIVE_MAXIMUM_ADDED = enum.auto()
    EXCLUSIVE_MAXIMUM_REMOVED = enum.auto()
    EXCLUSIVE_MAXIMUM_INCREASED = enum.auto()
    EXCLUSIVE_MAXIMUM_DECREASED = enum.auto()
    EXCLUSIVE_MINIMUM_ADDED = enum.auto()
    EXCLUSIVE_MINIMUM_REMOVED = enum.auto()
    EXCLUSIVE_MINIMUM_INCREASED = enum.auto()
    EXCLUSIVE_MINIMUM_DECREASED = enum.auto()
    MULTIPLE_OF_ADDED = enum.auto()
    MULTIPLE_OF_REMOVED = enum.auto()
    MULTIPLE_OF_EXPANDED = enum.auto()
    MULTIPLE_OF_REDUCED = enum.auto()
    MULTIPLE_OF_CHANGED = enum.auto()

    REQUIRED_ATTRIBUTE_ADDED = enum.auto()
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED = enum.auto()
    REQUIRED_ATTRIBUTE_REMOVED = enum.auto()
    MAX_PROPERTIES_ADDED = enum.auto()
    MAX_PROPERTIES_REMOVED = enum.auto()
    MAX_PROPERTIES_INCREASED = enum.auto()
    MAX_PROPERTIES_DECREASED = enum.auto()
    MIN_PROPERTIES_ADDED = enum.auto()
    MIN_PROPERTIES_REMOVED = enum.auto()
    MIN_PROPERTIES_INCREASED = enum.auto()
    MIN_PROPERTIES_DECREASED = enum.auto()
    ADDITIONAL_PROPERTIES_ADDED = enum.auto()
    ADDITIONAL_PROPERTIES_REMOVED = enum.auto()
    ADDITIONAL_PROPERTIES_EXTENDED = enum.auto()
    ADDITIONAL_PROPERTIES_NARROWED = enum.auto()
    DEPENDENCY_ARRAY_ADDED = enum.auto()
    DEPENDENCY_ARRAY_REMOVED = enum.auto()
    DEPENDENCY_ARRAY_EXTENDED = enum.auto()
    DEPENDENCY_ARRAY_NARROWED = enum.auto()
    DEPENDENCY_ARRAY_CHANGED = enum.auto()
    DEPENDENCY_SCHEMA_ADDED = enum.auto()
    DEPENDENCY_SCHEMA_REMOVED = enum.auto()
    REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL = enum.auto()
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL = enum.auto()
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()

    MAX_ITEMS_ADDED = enum.auto()
    MAX_ITEMS_REMOVED = enum.auto()
    MAX_ITEMS_INCREASED = enum.auto()
    MAX_ITEMS_DECREASED = enum.auto()
    MIN_ITEMS_ADDED = enum.auto()
    MIN_ITEMS_REMOVED = enum.auto()
    MIN_ITEMS_INCREASED = enum.auto()
    MIN_ITEMS_DECREASED = enum.auto()
    MAX_CONTAINS_ADDED = enum.auto()
    MAX_CONTAINS_REMOVED = enum.auto()
    MAX_CONTAINS_INCREASED = enum.auto()
    MAX_CONTAINS_DECREASED = enum.auto()
    MIN_CONTAINS_ADDED = enum.auto()
    MIN_CONTAINS_REMOVED = enum.auto()
    MIN_CONTAINS_INCREASED = enum.auto()
    MIN_CONTAINS_DECREASED = enum.auto()
    UNIQUE_ITEMS_ADDED = enum.auto()
    UNIQUE_ITEMS_REMOVED = enum.auto()
    ADDITIONAL_ITEMS_ADDED = enum.auto()
    ADDITIONAL_ITEMS_REMOVED = enum.auto()
    ADDITIONAL_ITEMS_EXTENDED = enum.auto()
    ADDITIONAL_ITEMS_NARROWED = enum.auto()
    ITEM_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_ADDED_TO_CLOSED_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()

    ENUM_ARRAY_EXTENDED = enum.auto()
    ENUM_ARRAY_NARROWED = enum.auto()
    ENUM_ARRAY_CHANGED = enum.auto()

    COMBINED_TYPE_EXTENDED = enum.auto()
    COMBINED_TYPE_CHANGED = enum.auto()
    PRODUCT_TYPE_EXTENDED = enum.auto()
    PRODUCT_TYPE_NARROWED = enum.auto()
    SUM_TYPE_EXTENDED = enum.auto()
    SUM_TYPE_NARROWED = enum.auto()
    COMBINED_TYPE_SUBSCHEMAS_CHANGED = enum.auto()
    NOT_TYPE_EXTENDED = enum.auto()
    NOT_TYPE_NARROWED = enum.auto()


COMPATIBLE_CHANGES: frozenset[Change] = frozenset(
    {
        Change.ID_CHANGED,
        Change.DESCRIPTION_CHANGED,
        Change.TITLE_CHANGED,
        Change.DEFAULT_CHANGED,
        Change.SCHEMA_REMOVED,
        Change.TYPE_EXTENDED,
        Change.MAX_LENGTH_INCREASED,
        Change.MAX_LENGTH_REMOVED,
        Change.MIN_LENGTH_DECREASED,
        Change.MIN_LENGTH_REMOVED,
        Change.PATTERN_REMOVED,
        Change.MAXIMUM_INCREASED,
        Change.MAXIMUM_REMOVED,
        Change.MINIMUM_DECREASED,
        Change.MINIMUM_REMOVED,
        Change.EXCLUSIVE_MAXIMUM_INCREASED,
        Change.EXCLUSIVE_MAXIMUM_REMOVED,
        Change.EXCLUSIVE_MINIMUM_DECREASED,
        Change.EXCLUSIVE_MINIMUM_REMOVED,
        Change.MULTIPLE_OF_REDUCED,
        Change.MULTIPLE_OF_REMOVED,
        Change.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED,
        Change.REQUIRED_ATTRIBUTE_REMOVED,
        Change.DEPENDENCY_ARRAY_NARROWED,
        Change.DEPENDENCY_ARRAY_REMOVED,
        Change.DEPENDENCY_SCHEMA_REMOVED,
        Change.MAX_PROPERTIES_INCREASED,
        Change.MAX_PROPERTIES_REMOVED,
        Change.MIN_PROPERTIES_DECREASED,
        Change.MIN_PROPERTIES_REMOVED,
        Change.ADDITIONAL_PROPERTIES_ADDED,
        Change.ADDITIONAL_PROPERTIES_EXTENDED,
        Change.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL,
        Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL,
        Change.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
        Change.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        Change.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL,
        Change.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.MAX_ITEMS_INCREASED,
        Change.MAX_ITEMS_REMOVED,
        Change.MIN_ITEMS_DECREASED,
        Change.MIN_ITEMS_REMOVED,
        Change.MAX_CONTAINS_INCREASED,
        Change.MAX_CONTAINS_REMOVED,
        Change.MIN_CONTAINS_DECREASED,
        Change.MIN_CONTAINS_REMOVED,
        Change.UNIQUE_ITEMS_REMOVED,
        Change.ADDITIONAL_ITEMS_ADDED,
        Change.ADDITIONAL_ITEMS_EXTENDED,
        Change.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL,
        Change.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL,
        Change.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        Change.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL,
        Change.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.ENUM_ARRAY_EXTENDED,
        Change.COMBINED_TYPE_EXTENDED,
        Change.PRODUCT_TYPE_NARROWED,
        Change.SUM_TYPE_EXTENDED,
        Change.NOT_TYPE_NARROWED,
    }
)


"""The changes after which the reader still reads everything the writer wrote (the registry's STRICT set).
Notably absent: adding an optional property to an open object (the writer may have written it with any
value), narrowing or closing additionalProperties."""


@dataclass(frozen=True)
class Difference:
    """One difference between a writer and a reader schema, at a path in them (`#/properties/a/...`)."""

    change: Change
    path: tuple[str, ...] = ()
    detail: str = ""

    @property
    def location(self) -> str:
        return "#/" + "/".join(self.path)

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.location}: {self.change.name}{detail}"
