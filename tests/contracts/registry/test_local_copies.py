"""A LocalRegistry in memory reaches each Spark task as a copy: what a copy lacks is named as such
(docs/semantics.md §1.3)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from contracts.errors import SerializationError
from contracts.formats.wire import writer_schema
from contracts.model import Schema
from contracts.registry.local import COPY_NOTE, LocalRegistry, copy_note
from executors.encrypt.keys import EncryptionKeyError, KeyRing, KeySpec

SCHEMA = Schema(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}))


def test_a_task_copy_of_a_registry_in_memory_names_itself_in_what_it_lacks() -> None:
    memory = LocalRegistry()
    memory.register_schema("r-value", SCHEMA)
    copy = pickle.loads(pickle.dumps(memory))
    memory.register_schema("s-value", Schema('"string"'))  # after the copy: not in it
    assert (memory.is_copy, copy.is_copy) == (False, True)
    assert copy.get_schema(1) == memory.get_schema(1)
    with pytest.raises(
        SerializationError, match="unknown schema id 2: the registry has no such schema"
    ) as error:
        writer_schema(copy, 2)
    assert str(error.value).endswith(f"({COPY_NOTE})")
    with pytest.raises(SerializationError) as original:
        writer_schema(memory, 99)
    assert COPY_NOTE not in str(original.value)
    memory.delete_subject("r-value")
    memory.delete_subject("r-value", permanent=True)
    older = pickle.loads(pickle.dumps(memory))  # id 1 is gone for good: no copy could have it
    with pytest.raises(SerializationError) as gone:
        writer_schema(older, 1)
    assert COPY_NOTE not in str(gone.value)


def test_a_copy_of_a_registry_directory_sees_what_the_directory_holds(tmp_path: Path) -> None:
    directory = LocalRegistry(tmp_path)
    copy = pickle.loads(pickle.dumps(directory))
    directory.register_schema("r-value", SCHEMA)
    assert not copy.is_copy and copy_note(copy) == ""
    assert copy.get_schema(1) == SCHEMA


def test_a_missing_kek_in_a_task_copy_says_so() -> None:
    copy = pickle.loads(pickle.dumps(LocalRegistry()))
    spec = KeySpec("kek1", "local-kms", "key1", "r-value", "AES256_GCM")
    with pytest.raises(
        EncryptionKeyError,
        match="no KEK named 'kek1' for subject 'r-value' in the DEK registry"
        " \\(the registry is a LocalRegistry",
    ):
        KeyRing(spec, copy, {}, ()).cryptor(1)
