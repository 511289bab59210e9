"""The names `contracts` exports lazily are the names type checkers see: one list, no drift."""

from __future__ import annotations

import ast
from pathlib import Path

import contracts


def test_the_type_checking_imports_are_the_lazy_names() -> None:
    tree = ast.parse(Path(contracts.__file__).read_text())
    (block,) = [
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    typed = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == contracts._LAZY
    assert set(contracts.__all__) == set(typed) | {
        name for name in vars(contracts) if name in contracts.__all__
    }


def test_every_exported_name_resolves() -> None:
    for name in contracts.__all__:
        assert getattr(contracts, name) is not None
