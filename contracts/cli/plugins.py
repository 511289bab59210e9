"""`--executor MODULE:ATTR` and `--action MODULE:ATTR`: a rule executor or an action loaded for one
run from an importable module (the current directory included, as `python -m` does), so a plugin
can be tried without packaging it as an entry point.

A module of the current directory travels with the job by value (cloudpickle), as the steps its
plugins compile run in Spark's Python workers, which cannot import it when they run elsewhere
(Spark Connect, a cluster) or in another directory. Modules it imports must be installed there.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from actions.protocol import Action
from contracts.cli.errors import UsageError, one_line

_EXECUTOR = "an executor: it needs a str `type` and `compile(ctx)` or `transform(ctx, message)`"
_ACTION = "an action: it needs a str `name` and `plan(ctx)`"


@dataclass(frozen=True)
class Plugins:
    """The executors and actions named on the command line, in order, ready for DataContract."""

    executors: tuple[Any, ...] = ()
    actions: tuple[Any, ...] = ()


def add_plugin_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable --executor and --action flags to a command that builds a DataContract."""
    parser.add_argument(
        "--executor",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="a rule executor to use (repeatable): a class (instantiated without arguments) or an"
        " instance, imported from MODULE (the current directory is importable); replaces the one"
        " of the same rule type",
    )
    parser.add_argument(
        "--action",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="an action to use (repeatable), loaded as --executor; replaces the one of the same name",
    )


def load_plugins(args: argparse.Namespace) -> Plugins:
    """The plugins of --executor and --action; UsageError naming the flag and value of the first
    that does not import, has no such attribute, cannot be instantiated or is not that kind of plugin."""
    return Plugins(
        executors=tuple(_load("--executor", spec, _is_executor, _EXECUTOR) for spec in args.executor),
        actions=tuple(_load("--action", spec, _is_action, _ACTION) for spec in args.action),
    )


def _load(flag: str, spec: str, check: Callable[[Any], bool], kind: str) -> Any:
    """The object `spec` names (a class instantiated), which `check` says is `kind` of plugin."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{flag} {spec}: expected MODULE:ATTR, e.g. my_rules:UpperCase")
    _current_directory_importable()
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # whatever the module raises while importing is the user's to fix
        raise UsageError(f"{flag} {spec}: cannot import {module_name!r}: {one_line(error)}") from error
    _by_value_if_local(module)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{flag} {spec}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        try:
            obj = obj()
        except Exception as error:
            raise UsageError(
                f"{flag} {spec}: cannot instantiate {attr} without arguments: {one_line(error)}"
            ) from error
    if not check(obj):
        raise UsageError(f"{flag} {spec}: {attr} is not {kind}")
    return obj


def _current_directory_importable() -> None:
    """Put the current directory first on sys.path unless it is there, as `python -m` does."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _by_value_if_local(module: ModuleType) -> None:
    """Pickle `module`'s classes and functions by value when it lives in the current directory."""
    from pyspark import cloudpickle

    path = getattr(module, "__file__", None)
    if path is not None and Path(path).resolve().is_relative_to(Path.cwd().resolve()):
        cloudpickle.register_pickle_by_value(module)


def _is_executor(obj: Any) -> bool:
    """Whether `obj` is an Executor (type + compile) or a RecordExecutor (type + transform)."""
    from executors import as_executor

    try:
        as_executor(obj)
    except TypeError:
        return False
    return isinstance(getattr(obj, "type", None), str)


def _is_action(obj: Any) -> bool:
    """Whether `obj` is an Action (name + plan)."""
    return isinstance(obj, Action) and isinstance(obj.name, str)
