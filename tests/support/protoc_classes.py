"""The Python classes protoc generates for a test `.proto` file, which the reference's Protobuf
serializers take: compiled at test time with grpcio-tools, imported from a temporary folder."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any


def generated_module(out: Path, file_name: str, text: str, confluent_meta: bool = False) -> Any:
    """`file_name`'s `_pb2` module for `text`, written and compiled in `out`. With `confluent_meta`
    the file may import "confluent/meta.proto" and "confluent/type/decimal.proto": the generated
    code then imports the reference's own bundled `confluent.meta_pb2` and
    `confluent.type.decimal_pb2`, as an application compiling against Confluent's files does."""
    from grpc_tools import protoc

    from contracts.registry.protobuf_schema import BUNDLED

    (out / file_name).write_text(text)
    include = Path(protoc.__file__).parent / "_proto"
    bundled = [f"-I{BUNDLED}"] if confluent_meta else []
    assert (
        protoc.main(["protoc", f"-I{out}", *bundled, f"-I{include}", f"--python_out={out}", file_name]) == 0
    )
    names = ("confluent", "confluent.meta_pb2", "confluent.type", "confluent.type.decimal_pb2")
    saved = {name: sys.modules.get(name) for name in names}
    if confluent_meta:
        from confluent_kafka.schema_registry.confluent import meta_pb2
        from confluent_kafka.schema_registry.confluent import type as type_package
        from confluent_kafka.schema_registry.confluent.type import decimal_pb2

        package = types.ModuleType("confluent")
        package.meta_pb2 = meta_pb2  # type: ignore[attr-defined]
        package.type = type_package  # type: ignore[attr-defined]
        modules = {"confluent.type": type_package, "confluent.type.decimal_pb2": decimal_pb2}
        sys.modules.update({"confluent": package, "confluent.meta_pb2": meta_pb2, **modules})
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module(file_name.removesuffix(".proto") + "_pb2")
    finally:
        sys.path.remove(str(out))
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
