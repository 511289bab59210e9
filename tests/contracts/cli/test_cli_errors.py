"""How the CLI puts an error on one line (contracts.cli.errors)."""

from __future__ import annotations

from pyspark.errors import PythonException

from contracts.cli.errors import one_line


def test_an_exception_from_a_python_worker_is_its_whole_message_on_one_line() -> None:
    worker = (
        "An exception was thrown from the Python worker:\n"
        "Traceback (most recent call last):\n"
        '  File "pass.py", line 66, in __call__\n'
        "    ruled = run(batch)\n"
        "contracts.errors.SerializationError: the result of TRANSFORM rule 'tx' (WRITE) does not match: [\n"
        "  \"User.age is <20> of type <class 'str'> expected int\"\n"
        "]\n"
        "\n"
        "JVM stacktrace:\n"
        "org.apache.spark.api.python.PythonException: ...\n"
    )
    assert one_line(PythonException(worker)) == (
        "SerializationError: the result of TRANSFORM rule 'tx' (WRITE) does not match: ["
        " \"User.age is <20> of type <class 'str'> expected int\" ]"
    )
