"""The one plugin lookup: executors, actions, schema formats and KMS drivers, by name, filled from
entry points (docs/semantics.md §9.7).

Built-in executors and actions are declared in this project's own entry-point groups, so they load
the same way a user's plugins do; a contract's own executors and actions override them for that
contract only (`with_overrides`). Formats and KMS drivers are process-wide (`InstalledPlugins`):
built-ins, then the group's entry points, then what code registers.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from operator import attrgetter
from typing import Any, Generic, TypeVar

from contracts.errors import ContractError

EXECUTOR_GROUP = "spark_data_contracts.executors"
ACTION_GROUP = "spark_data_contracts.actions"
FORMAT_GROUP = "spark_data_contracts.formats"
KMS_GROUP = "spark_data_contracts.kms"

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

    def plugins(self) -> list[T]:
        """The plugins registered by key (not those for one rule only)."""
        return list(self._by_key.values())

    def copy(self) -> PluginRegistry[T]:
        other: PluginRegistry[T] = PluginRegistry(self._key)
        other._by_key = dict(self._by_key)
        other._by_rule = dict(self._by_rule)
        return other


def instantiate(obj: Any) -> Any:
    """An entry point may name a class (instantiated without arguments) or an instance."""
    return obj() if inspect.isclass(obj) else obj


def load_group(
    group: str,
    key: Callable[[Any], str],
    adapt: Callable[[Any], Any] = lambda plugin: plugin,
    error: Callable[[str], Exception] = ContractError,
) -> PluginRegistry[Any]:
    """A registry holding every plugin advertised in the entry-point `group`, each through `adapt`;
    `error` (a ContractError by default) names a plugin that cannot be loaded."""
    registry: PluginRegistry[Any] = PluginRegistry(key)
    for point in entry_points(group=group):
        try:
            plugin = adapt(instantiate(point.load()))
        except Exception as e:
            raise error(f"cannot load plugin {point.name!r} from entry point {point.value!r}: {e}") from e
        registry.register(plugin)
    return registry


class InstalledPlugins(Generic[T]):
    """A group's plugins for the whole process: `builtins`, then the group's entry points (loaded
    once, on first use, and replacing a built-in of the same key), then what `register` adds."""

    def __init__(
        self,
        group: str,
        key: Callable[[T], str],
        builtins: Iterable[T] = (),
        error: Callable[[str], Exception] = ContractError,
    ) -> None:
        self._group = group
        self._key = key
        self._error = error
        self._plugins: PluginRegistry[T] = PluginRegistry(key)
        for plugin in builtins:
            self._plugins.register(plugin)
        self._registered: list[T] = []
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, plugin: T) -> None:
        """Make `plugin` the one for its key in this process."""
        with self._lock:
            self._registered.append(plugin)
            self._plugins.register(plugin)

    def find(self, key: str) -> T | None:
        """The plugin for `key` (case-insensitive), or None."""
        return self._installed().find(key)

    def names(self) -> list[str]:
        """The keys of the plugins, as they give them."""
        return sorted({self._key(plugin) for plugin in self._installed().plugins()})

    def _installed(self) -> PluginRegistry[T]:
        with self._lock:
            if not self._loaded:
                for plugin in load_group(self._group, self._key, error=self._error).plugins():
                    self._plugins.register(plugin)
                for plugin in self._registered:  # code registered before the entry points loaded
                    self._plugins.register(plugin)
                self._loaded = True
            return self._plugins


FORMATS: InstalledPlugins[Any] = InstalledPlugins(FORMAT_GROUP, attrgetter("schema_type"))
"""The schema formats of this process beyond the built-in ones: installed in FORMAT_GROUP, or
registered (`contracts.formats.register`). `contracts.formats` puts them over its built-in ones;
LocalRegistry reads their schemas with them (contracts/registry/checkers.py)."""


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
