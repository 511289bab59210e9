"""`RuleConfig`: the configuration a contract passes to its executors, as the reference's `rule_conf`.

It holds secrets (a local KMS's `secret`, KMS credentials), so its values never print: its repr
names the keys only. Executors read it from `RuleContext.rule_config` (docs/semantics.md §11).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class RuleConfig(Mapping[str, str]):
    """An immutable str → str mapping whose repr and str show keys, never values."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        items = dict(values or {})
        for key, value in items.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"rule_config maps strings to strings; key {key!r} does not")
        self._values = items

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RuleConfig(keys={sorted(self._values)!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._values) == dict(other)

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))
