"""No module imports another package's private name: what a package shares, it names publicly."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("contracts", "executors", "actions")


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _module(path: Path, root: Path) -> tuple[str, str]:
    """The module's dotted name and the package it belongs to."""
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts[:-1])
    return ".".join(parts), ".".join(parts[:-1])


def _owner(parts: list[str], root: Path) -> str:
    """The package a private name or module belongs to: the package it is in, or its module's package."""
    if (root.joinpath(*parts) / "__init__.py").exists():
        return ".".join(parts)
    return ".".join(parts[:-1])


def _crossings(path: Path, root: Path = ROOT) -> Iterator[str]:
    module, package = _module(path, root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [[*node.module.split("."), alias.name] for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        else:
            continue
        for target in targets:
            first = next((i for i, part in enumerate(target) if _private(part)), None)
            if first is not None and _owner(target[:first], root) != package:
                yield f"{module} imports {'.'.join(target)}"


def test_no_module_imports_another_packages_private_name() -> None:
    crossings = [
        c for name in PACKAGES for path in sorted((ROOT / name).rglob("*.py")) for c in _crossings(path)
    ]
    assert crossings == []


def test_the_check_sees_a_crossing_and_allows_a_package_its_own(tmp_path: Path) -> None:
    for package in ("cel", "cel_field"):
        (tmp_path / "executors" / package).mkdir(parents=True)
        (tmp_path / "executors" / package / "__init__.py").write_text("")
    (tmp_path / "executors" / "cel" / "_runtime.py").write_text("")
    (tmp_path / "executors" / "cel" / "own.py").write_text("from executors.cel._runtime import run\n")
    probe = tmp_path / "executors" / "cel_field" / "probe.py"
    probe.write_text("from executors.cel._runtime import run\nfrom executors.cel import _runtime\n")
    assert list(_crossings(probe, tmp_path)) == [
        "executors.cel_field.probe imports executors.cel._runtime.run",
        "executors.cel_field.probe imports executors.cel._runtime",
    ]
    assert list(_crossings(tmp_path / "executors" / "cel" / "own.py", tmp_path)) == []
