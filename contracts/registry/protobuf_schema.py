"""Protobuf schema text into descriptors: Google's own compiler (`grpc_tools.protoc`) parses the
`.proto` text with its imports, and the parsed form keeps only the serialized FileDescriptorSet,
so it pickles small and each Python worker builds its descriptor pool once (per process, bounded).
"""

from __future__ import annotations

import base64
import binascii
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from contracts.bounded import BoundedCache
from contracts.errors import ContractError

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor
    from google.protobuf.descriptor_pb2 import DescriptorProto, FileDescriptorProto
    from google.protobuf.descriptor_pool import DescriptorPool

MAIN_FILE = "default.proto"
"""The file name the registered schema is compiled under (Confluent's clients call it "default")."""

BUNDLED = Path(__file__).parent / "proto"
"""Confluent's own imports the schemas may use without a reference (`confluent/meta.proto`), as
Confluent's clients bundle them."""
_PROTOC_TIMEOUT = 60.0
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")
_PREAMBLE = "WARNING: All log messages before absl::InitializeLog()"
_SHOWN_LENGTH = 600
"""How much of protoc's message an error shows."""
_POOLS: BoundedCache[bytes, DescriptorPool] = BoundedCache(64)
"""Per process: the descriptor pool of each descriptor set."""
_PARSED: BoundedCache[tuple[str, tuple[tuple[str, str], ...]], ProtoSchema] = BoundedCache(64)
"""Per process: each schema text with its references, compiled (protoc runs once per schema)."""
_MISSING = (
    "Protobuf contracts need the `protobuf` extra: pip install 'spark-data-contracts[protobuf]'"
    " (grpcio-tools compiles the .proto text, protobuf reads the records)"
)


@dataclass(frozen=True)
class ProtoSchema:
    """A parsed Protobuf schema: its text, the compiled FileDescriptorSet (the file and every file
    it imports, dependencies first), the full name of the record's message (the file's first
    unless `choose` picked another) and its message indexes in the file. Pickles; `pool()` and
    `message()` give the descriptors, built once per process."""

    text: str
    descriptor_set: bytes
    file_name: str
    message_name: str
    message_indexes: tuple[int, ...] = (0,)

    def pool(self) -> DescriptorPool:
        return _POOLS.get_or_make(self.descriptor_set, lambda: _build_pool(self.descriptor_set))

    def message(self) -> Descriptor:
        """The record's message type."""
        return self.pool().FindMessageTypeByName(self.message_name)

    def messages(self) -> dict[str, tuple[int, ...]]:
        """Every message the file declares, nested ones too (not the entries protoc makes for map
        fields), by full name, with the message indexes a frame of it carries, in file order."""
        from google.protobuf import descriptor_pb2

        main = descriptor_pb2.FileDescriptorSet.FromString(self.descriptor_set).file[-1]
        found: dict[str, tuple[int, ...]] = {}

        def add(prefix: str, messages: Sequence[DescriptorProto], at: tuple[int, ...]) -> None:
            for index, message in enumerate(messages):
                if not message.options.map_entry:
                    name = f"{prefix}{message.name}"
                    found[name] = (*at, index)
                    add(f"{name}.", message.nested_type, (*at, index))

        add(f"{main.package}." if main.package else "", main.message_type, ())
        return found

    def choose(self, message_name: str) -> ProtoSchema:
        """This schema with `message_name` (a full name: `acme.Outer.Inner`) as the record's
        message; ContractError naming the file's messages when it declares no such message."""
        messages = self.messages()
        indexes = messages.get(message_name)
        if indexes is None:
            raise ContractError(
                f"the Protobuf schema declares no message {message_name!r}; its messages are"
                f" {', '.join(messages)}",
                position="protobuf_message",
            )
        return replace(self, message_name=message_name, message_indexes=indexes)

    def message_at(self, indexes: Sequence[int]) -> Descriptor:
        """The message a frame's message indexes name: the top-level message at the first index,
        then nested ones; ValueError saying which index is out of range."""
        file = self.pool().FindFileByName(self.file_name)
        types = list(file.message_types_by_name.values())
        where = "the file"
        found: Descriptor | None = None
        for index in indexes:
            if not 0 <= index < len(types):
                raise ValueError(
                    f"message index {index} out of range: {where} has {len(types)} message type(s)"
                )
            found = types[index]
            types, where = list(found.nested_types), f"message {found.full_name}"
        if found is None:
            raise ValueError("empty message indexes")
        return found


def parse_proto(schema_str: str, references: Sequence[tuple[str, str]] = ()) -> ProtoSchema:
    """The `.proto` text compiled with its references (each its import path and text,
    dependencies first; google/protobuf's well-known types need none); ContractError with protoc's
    message when it does not compile, or when the file declares no message.

    The schema may also be a serialized FileDescriptorProto in base64, the form Confluent's
    clients register and ask for (`format=serialized`): protoc then compiles what it imports, and
    the descriptor joins them."""
    key = (schema_str, tuple(references))
    found = _PARSED.get(key)
    return found if found is not None else _PARSED.put(key, _parse(schema_str, references))


def _parse(schema_str: str, references: Sequence[tuple[str, str]]) -> ProtoSchema:
    try:
        from google.protobuf import descriptor_pb2
    except ImportError as e:
        raise ContractError(_MISSING, position="schema") from e
    serialized = _serialized(schema_str)
    if serialized is None:
        descriptor_set = _compile(schema_str, references)
    else:
        for name in serialized.dependency:
            _check_path(name, "import")
        imports = "".join(f'import "{name}";\n' for name in serialized.dependency)
        compiled = descriptor_pb2.FileDescriptorSet.FromString(
            _compile(f'syntax = "proto3";\n{imports}', references)
        )
        del compiled.file[-1]  # the stub that imported them
        serialized.name = MAIN_FILE
        compiled.file.append(serialized)
        descriptor_set = compiled.SerializeToString()
        try:
            _build_pool(descriptor_set)
        except (TypeError, ValueError) as e:
            raise ContractError(
                f"invalid Protobuf schema (a serialized descriptor): {e}", position="schema"
            ) from e
    main = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file[-1]
    if not main.message_type:
        raise ContractError("the Protobuf schema declares no message type", position="schema")
    name = main.message_type[0].name
    full_name = f"{main.package}.{name}" if main.package else name
    return ProtoSchema(schema_str, descriptor_set, MAIN_FILE, full_name)


def _serialized(schema_str: str) -> FileDescriptorProto | None:
    """The schema as a FileDescriptorProto when it is one in base64 (`.proto` text never is: it
    has spaces, quotes and semicolons), else None."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    text = schema_str.strip()
    if not _BASE64.fullmatch(text):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, DecodeError):
        return None


def _compile(text: str, references: Sequence[tuple[str, str]]) -> bytes:
    """protoc's FileDescriptorSet of `text` and everything it imports, the text's file last."""
    try:
        from grpc_tools import protoc
    except ImportError as e:
        raise ContractError(_MISSING, position="schema") from e
    files = _named_files(references)
    with tempfile.TemporaryDirectory(prefix="contracts-proto-") as tmp:
        root = Path(tmp) / "src"
        for name, source in [*files.items(), (MAIN_FILE, text)]:
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source, encoding="utf-8")
        out = Path(tmp) / "set.pb"
        include = Path(protoc.__file__).parent / "_proto"
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={root}",
            f"--proto_path={include}",
            f"--proto_path={BUNDLED}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            str(root / MAIN_FILE),
        ]
        try:
            done = subprocess.run(command, capture_output=True, timeout=_PROTOC_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as e:
            raise ContractError(
                f"protoc did not finish compiling the schema in {_PROTOC_TIMEOUT:g}s", position="schema"
            ) from e
        if done.returncode != 0:
            said = _said(done.stderr.decode("utf-8", "replace").replace(f"{root}/", ""))
            raise ContractError(f"invalid Protobuf schema: {_shown(said)}", position="schema")
        return out.read_bytes()


def _named_files(references: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Each reference's text by the import path it is written under; ContractError for a path
    that is empty, absolute or climbs out of the source tree."""
    files: dict[str, str] = {}
    for name, text in references:
        _check_path(name, "reference name")
        files.setdefault(name, text)
    return files


def _check_path(name: str, what: str) -> None:
    """ContractError unless `name` is a relative path inside the source tree (not the schema's)."""
    path = PurePosixPath(name)
    usable = re.fullmatch(r"[\w./-]+", name) and not path.is_absolute() and ".." not in path.parts
    if not usable or name == MAIN_FILE:
        raise ContractError(f"{what} {name!r} is not a usable import path", position="references")


def _build_pool(descriptor_set: bytes) -> DescriptorPool:
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file:
        pool.Add(file)
    return pool


def _said(stderr: str) -> str:
    """protoc's messages without the logging library's preamble and line prefixes."""
    lines = [_LOG_PREFIX.sub("", line) for line in stderr.splitlines() if not line.startswith(_PREAMBLE)]
    return "\n".join(line for line in lines if line.strip())


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_LENGTH else text[:_SHOWN_LENGTH] + "…"
