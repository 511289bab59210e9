"""A field's `(confluent.field_meta)` option (confluent/meta.proto): its tags and params, read with
the field's own descriptor pool, which knows the extension when the schema imports meta.proto (the
protobuf runtime's default pool does not, and keeps the option as unknown bytes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contracts.bounded import BoundedCache

if TYPE_CHECKING:
    from google.protobuf.descriptor import FieldDescriptor

FIELD_META = "confluent.field_meta"
"""The field option whose `tags` tag a field and whose `params` parameterize its type."""
_READERS: BoundedCache[Any, tuple[Any, ...]] = BoundedCache(64)
"""Per descriptor pool: the field_meta extension and the pool's FieldOptions class (empty: the
pool has no such extension)."""


def field_meta(field: FieldDescriptor) -> Any | None:
    """The field's `confluent.Meta` option, None when it has none."""
    pool = field.file.pool
    reader = _READERS.get_or_make(pool, lambda: _reader(pool))
    if not reader:
        return None
    extension, options_class = reader
    options = options_class.FromString(field.GetOptions().SerializeToString())
    return options.Extensions[extension] if options.HasExtension(extension) else None


def field_tags(field: FieldDescriptor) -> tuple[str, ...]:
    """The field's `(confluent.field_meta).tags`."""
    meta = field_meta(field)
    return () if meta is None else tuple(meta.tags)


def field_params(field: FieldDescriptor) -> dict[str, str]:
    """The field's `(confluent.field_meta).params`."""
    meta = field_meta(field)
    return {} if meta is None else dict(meta.params)


def _reader(pool: Any) -> tuple[Any, ...]:
    from google.protobuf.message_factory import GetMessageClass

    try:
        extension = pool.FindExtensionByName(FIELD_META)
    except KeyError:
        return ()
    return extension, GetMessageClass(pool.FindMessageTypeByName("google.protobuf.FieldOptions"))
