"""Plugin lookup by name for executors and actions, filled from entry points (docs/semantics.md §9.7).

Built-ins are declared in this project's own entry-point groups, so they load the same way a
user's plugins do; registering by code adds or replaces plugins for one registry only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from contracts.errors import ContractError

EXECUTOR_GROUP = "spark_data_contracts.executors"
ACTION_GROUP = "spark_data_contracts.actions"

T = TypeVar("T")


class PluginRegistry(Generic[T]):
    """Plugins keyed by their upper-cased type or name, plus overrides keyed by rule name."""

    def __init__(self, key: Callable[[T], str]) -> None:
        self._key = key
        self._by_key: dict[str, T] = {}
        self._by_rule: dict[str, T] = {}

    def register(self, plugin: T, *, rule_name: str | None = None) -> None:
        """Add `plugin` under its own key, or only for the rule called `rule_name`."""
        if rule_name is not None:
            self._by_rule[rule_name] = plugin
        else:
            self._by_key[self._key(plugin).upper()] = plugin

    def find(self, key: str, *, rule_name: str | None = None) -> T | None:
        """The plugin configured for `rule_name` first, else the one for `key` (case-insensitive)."""
        if rule_name is not None and rule_name in self._by_rule:
            return self._by_rule[rule_name]
        return self._by_key.get(key.upper())

    def names(self) -> list[str]:
        return sorted(self._by_key)

    def copy(self) -> PluginRegistry[T]:
        other: PluginRegistry[T] = PluginRegistry(self._key)
        other._by_key = dict(self._by_key)
        other._by_rule = dict(self._by_rule)
        return other


def instantiate(obj: Any) -> Any:
    """An entry point may name a class (instantiated without arguments) or an instance."""
    return obj() if inspect.isclass(obj) else obj


def load_group(
    group: str, key: Callable[[Any], str], adapt: Callable[[Any], Any] = lambda plugin: plugin
) -> PluginRegistry[Any]:
    """A registry holding every plugin advertised in the entry-point `group`, each through `adapt`."""
    registry: PluginRegistry[Any] = PluginRegistry(key)
    for point in entry_points(group=group):
        try:
            plugin = adapt(instantiate(point.load()))
        except Exception as e:
            raise ContractError(
                f"cannot load plugin {point.name!r} from entry point {point.value!r}: {e}"
            ) from e
        registry.register(plugin)
    return registry


def with_overrides(
    base: PluginRegistry[T], plugins: Iterable[T] | Mapping[str, T] | None
) -> PluginRegistry[T]:
    """`base` plus user plugins: a sequence registers by type/name, a mapping by rule name."""
    if not plugins:
        return base
    registry = base.copy()
    if isinstance(plugins, Mapping):
        for rule_name, plugin in plugins.items():
            registry.register(instantiate(plugin), rule_name=rule_name)
    else:
        for plugin in plugins:
            registry.register(instantiate(plugin))
    return registry
