"""What `DataContract(...)` warns about at load: a contract that loads but cannot do what it says."""

from __future__ import annotations

import json
import warnings

import pytest

from contracts import ContractWarning, DataContract, LocalRegistry, Schema

USER = {"type": "record", "name": "User", "fields": [{"name": "age", "type": "int"}]}


def contract_with(rule_type: str, mode: str) -> DataContract:
    registry = LocalRegistry()
    rule = {"name": "checked", "kind": "CONDITION", "type": rule_type, "mode": mode, "expr": "x"}
    payload = {"schema": json.dumps(USER), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema("users-value", Schema.from_dict(payload))
    return DataContract(registry, "users-value")


def test_a_rule_no_executor_handles_warns_at_load_naming_it_and_what_it_will_do() -> None:
    with pytest.warns(ContractWarning) as caught:
        contract_with("MYSTERY", "WRITE")
    [warning] = caught
    assert str(warning.message) == (
        "subject=users-value version=1 rule=checked type=MYSTERY: no executor handles this rule type,"
        " so in WRITE it fails every record (on failure: ERROR) and the rules after it are skipped"
    )
    assert warning.filename == __file__  # pointed at the caller's DataContract(...) line


def test_a_contract_every_rule_of_which_runs_loads_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        contract_with("CEL", "WRITE").explain()
