"""Statuses read from an Arrow `_contract` column once per distinct status, exactly as `to_pylist`."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from contracts.engine.columns import status_values

_STATUS = pa.struct(
    [
        ("rule", pa.string()),
        ("mode", pa.string()),
        ("action", pa.string()),
        ("reason", pa.string()),
        ("topic", pa.string()),
        ("subject", pa.string()),
        ("version", pa.int32()),
    ]
)
# Few values per field, so rows repeat statuses and differ in one field only; "" beside null.
_texts = st.sampled_from([None, "", "a", "b", "a\x00b"])
_statuses = st.none() | st.fixed_dictionaries(
    {
        "rule": _texts,
        "mode": st.sampled_from(["READ", "WRITE"]),
        "action": _texts,
        "reason": _texts,
        "topic": _texts,
        "subject": _texts,
        "version": st.sampled_from([None, 1, 2]),
    }
)


@given(st.lists(_statuses, max_size=60), st.integers(0, 3))
def test_statuses_read_once_per_distinct_status_equal_to_pylist(rows: list[Any], offset: int) -> None:
    column = pa.array(rows, _STATUS).slice(min(offset, len(rows)))
    read = status_values(column)
    assert read == column.to_pylist()
    by_value: dict[str, int] = {}
    for status in read:
        if status is not None:
            assert by_value.setdefault(repr(status), id(status)) == id(status)


def test_a_chunked_column_and_an_empty_one() -> None:
    status = {
        "rule": "r",
        "mode": "WRITE",
        "action": "DLQ",
        "reason": None,
        "topic": "t",
        "subject": "s",
        "version": 1,
    }
    chunked = pa.chunked_array([pa.array([status, None], _STATUS), pa.array([status], _STATUS)])
    assert status_values(chunked) == [status, None, status]
    assert status_values(pa.array([], _STATUS)) == []
