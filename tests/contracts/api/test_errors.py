"""Every exception the library raises derives from DataContractError, so one `except` catches them all."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import actions
import contracts
import executors
from contracts.errors import DataContractError

# Signals that steer one module's own control flow and are caught inside the package that raises
# them: each names the place that catches it. They carry no subject, version or rule of their own.
INTERNAL_SIGNALS = {
    "contracts.cli.errors.UsageError": "contracts.cli.main turns it into exit status 2",
    "contracts.engine.native_migration._Inexact": "the projection falls back to the Python path",
    "contracts.engine.encoding_rules.PayloadRefused": "contracts.engine.decode sets the row's status from it",
    "contracts.formats.avro.json_view._Unreadable": "the conversion reports it with its path",
    "contracts.formats.fields.ConditionFailed": "the field walk ends the CONDITION with it",
    "contracts.formats.json_schema.native.Inexact": "the keyword is checked in Python instead",
    "executors.cel.checks.ExpressionProblem": "executors.cel.runtime raises it as a ContractError",
    "executors.cel.compiler.terms.NotNativeCel": "the rule runs with cel-python instead",
    "executors.cel.runtime._Failed": "the rule's outcome carries its reason",
    "executors.cel_field.batch._EvaluationFailed": "the rule's outcome carries its reason",
    "executors.encrypt.executor._FieldFailure": "the record's outcome carries its reason",
    "executors.jsonata.values.NotNativeJsonata": "the rule runs in Python instead",
}


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in the library's modules, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for package in (contracts, executors, actions):
        for module_info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if module_info.name.endswith(".__main__"):
                continue  # runs the CLI when imported
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and not issubclass(value, Warning)
                    and value.__module__ == module.__name__
                ):
                    found[f"{module.__name__}.{name}"] = value
    return found


def test_every_exception_of_the_library_is_a_data_contract_error_or_an_internal_signal() -> None:
    classes = _exception_classes()
    outside = {name for name, cls in classes.items() if not issubclass(cls, DataContractError)}
    assert outside == set(INTERNAL_SIGNALS)


def test_the_key_and_kms_errors_are_data_contract_errors_and_keep_their_bases() -> None:
    from executors.encrypt import KmsError
    from executors.encrypt.cryptor import KeyMaterialError
    from executors.encrypt.keys import EncryptionKeyError

    assert issubclass(KmsError, DataContractError)
    assert issubclass(EncryptionKeyError, DataContractError)
    assert issubclass(KeyMaterialError, DataContractError) and issubclass(KeyMaterialError, ValueError)
