"""An ERROR met in the Python pass (an action, an executor exception, a migration) fails the job as
a native ERROR does."""

from __future__ import annotations

import sys
from typing import Any

from dataframe_users import PythonOnly, failure, make_contract, rule
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from executors.cel.executor import CelExecutor

# Executors and actions defined here run on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# -- an ERROR in Python fails the job as a native ERROR does ------------------------------------


class Explode:
    """A per-record executor that raises: its rule fails with the exception as its reason."""

    type = "EXPLODE"

    def transform(self, ctx: Any, message: dict[str, Any]) -> bool:
        raise ValueError(f"cannot judge {message['name']!r}")


def test_an_error_action_in_the_python_pass_fails_the_job_as_a_native_one(
    sink: LocalTopicSink, users: Any
) -> None:
    rules = [rule("positiveAge", "message.age > 0")]
    native = make_contract(sink, rules)
    python = make_contract(sink, rules, executors={"positiveAge": PythonOnly(CelExecutor())})
    assert "(native)" in native.explain() and "(python)" in python.explain()
    expected = (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] Rule 'positiveAge' failed in WRITE on subject 'users-value' version 1:"
        " Rule expr failed: message.age > 0",
    )
    assert failure(native.write(users))[:2] == expected
    assert failure(python.write(users))[:2] == expected
    assert failure(python.apply(users).valid)[:2] == expected


def test_an_executor_exception_behind_an_error_action_keeps_its_traceback(
    sink: LocalTopicSink, users: Any
) -> None:
    contract = make_contract(sink, [rule("judged", "", type="EXPLODE")], executors=[Explode()])
    name, first, text = failure(contract.write(users.where("id = 2")))
    assert (name, first) == (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] Rule 'judged' failed in WRITE on subject 'users-value' version 1:"
        " ValueError: cannot judge 'bob'",
    )
    assert "Traceback (most recent call last)" in text and "in transform" in text
