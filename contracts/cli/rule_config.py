"""`--rule-config-file PATH` and `--rule-config-env NAME`: the rule config a command's contract
passes to its executors (`DataContract(rule_config=...)`, e.g. local-kms's `secret`).

Both hold one JSON object mapping strings to strings: a file, or one environment variable (keys
such as `encrypt.kms.key.id` hold dots, which variable names cannot). Given both, a key in both
takes the environment's value. There is no flag taking a value on the command line, where shell
history and process listings would keep it. The values are secrets: an error names the file or
variable and the key, never a value, and none is printed with --debug or in a progress line.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from contracts.cli.errors import UsageError
from contracts.cli.secrets import read_secret_file, read_secret_variable

if TYPE_CHECKING:
    from executors.config import RuleConfig

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


def add_rule_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --rule-config-file and --rule-config-env to a command that builds a DataContract."""
    parser.add_argument(
        "--rule-config-file",
        metavar="PATH",
        help="a JSON file holding one object of strings, the rule config passed to the rules'"
        ' executors (e.g. {"secret": "…"} for local-kms); values are never printed',
    )
    parser.add_argument(
        "--rule-config-env",
        metavar="NAME",
        help="an environment variable holding the rule config as the same JSON object; its keys"
        " take precedence over --rule-config-file's",
    )


def load_rule_config(args: argparse.Namespace) -> RuleConfig:
    """The rule config of --rule-config-file, then --rule-config-env over it (empty without either);
    UsageError naming the file or variable, and never a value, when one cannot be used."""
    from executors.config import RuleConfig

    values: dict[str, str] = {}
    if args.rule_config_file is not None:
        values |= _from_file(args.rule_config_file)
    if args.rule_config_env is not None:
        values |= _from_environment(args.rule_config_env)
    return RuleConfig(values)


def _from_file(path: str) -> dict[str, str]:
    where = f"--rule-config-file {path}"
    return _parse(read_secret_file(path, where), where)


def _from_environment(name: str) -> dict[str, str]:
    where = f"--rule-config-env {name}"
    return _parse(read_secret_variable(name, where), where)


def _parse(text: str, where: str) -> dict[str, str]:
    """The JSON object of strings in `text`; a UsageError says what is wrong without quoting it
    (a JSON error's position, a key, the JSON type of a value)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{where}: not JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply to be a JSON object of strings") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: must hold a JSON object of strings, not {_kind(data)}")
    for key, value in data.items():
        if not isinstance(value, str):
            raise UsageError(f"{where}: the value of {key!r} must be a string, not {_kind(value)}")
    return data


def _kind(value: Any) -> str:
    """A JSON value's type, as JSON names it (`an array`, `a number`, `null`)."""
    if value is None:
        return "null"
    kind = _JSON_TYPES.get(type(value), type(value).__name__)
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"
