"""Parity with confluent-kafka 2.16.1 (issue 3): every corpus case has the reference's outcome per record.

Each case runs through the reference oracle (tests/support/reference_oracle.py) and through our engine —
`DataContract.serialize` on WRITE, `DataContract.deserialize` of the reference's bytes on READ —
and each record must end the same way: the same record, an error naming the same rule, or the
same DLQ record (topic, key, value bytes, headers in order). Records the reference passes or
sends to a DLQ run together in one DataFrame; each record it fails with an error runs alone, since
it fails our whole Spark job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from parity_corpus import CASES, SUBJECT, TOPIC, Case
from reference_oracle import (
    PLAIN_VERSION_ID,
    Outcome,
    SourceRecord,
    add_dlq_outcomes,
    decode,
    reference_outcomes,
    written_by_reference,
)

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError
from contracts.formats import avro

ROW_HEADER = "row"
"""Every record carries its index in this header, so its DLQ record can be told apart."""


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_engine_ends_each_record_as_the_reference_does(spark: Any, case: Case, tmp_path: Path) -> None:
    records = _numbered(case.records)
    reference = reference_outcomes(case.contract, case.mode, records, SUBJECT, TOPIC)
    expected = case.difference.ours(reference) if case.difference is not None else reference
    engine = _Engine(spark, case, tmp_path)
    kept = [i for i, outcome in enumerate(expected) if outcome[0] != "error"]
    assert engine.outcomes([records[i] for i in kept]) == {i: expected[i] for i in kept}
    for i, outcome in enumerate(expected):
        if outcome[0] == "error":
            engine.expect_error(records[i], outcome)


def _numbered(records: Sequence[SourceRecord]) -> list[SourceRecord]:
    return [
        replace(record, headers=((ROW_HEADER, str(i).encode()), *record.headers))
        for i, record in enumerate(records)
    ]


class _Engine:
    """Our side of one case: the contract on a LocalRegistry, DLQ records in a LocalTopicSink."""

    def __init__(self, spark: Any, case: Case, tmp_path: Path) -> None:
        self.spark = spark
        self.case = case
        self.parsed = avro.parse_schema(case.contract.schema_text)
        self.sink = LocalTopicSink(tmp_path / "dlq")
        self.load_error: ContractError | None = None
        try:
            self.contract = self._load()
        except ContractError as e:
            self.load_error = e

    def _load(self) -> DataContract:
        """The case's contract registered in a LocalRegistry (after a rule-less first version on READ)."""
        registry = LocalRegistry()
        if self.case.mode == "READ":
            registry.register_schema(SUBJECT, Schema.from_dict(self.case.contract.plain_payload()))
        registry.register_schema(SUBJECT, Schema.from_dict(self.case.contract.payload()))
        return DataContract(registry, SUBJECT, dlq_sink=self.sink)

    def outcomes(self, records: list[SourceRecord]) -> dict[int, Outcome]:
        """Run the records in one DataFrame: each one's outcome by its row number."""
        outcomes: dict[int, Outcome] = {}
        if not records:
            return outcomes
        for row in self._run(records).collect():
            outcomes[row["row"]] = ("record", self._record(row))
        add_dlq_outcomes(self.sink, outcomes, ROW_HEADER)
        return outcomes

    def expect_error(self, record: SourceRecord, outcome: Outcome) -> None:
        """The record alone fails the job, naming the rule the reference names."""
        with pytest.raises(Exception) as caught:
            self._run([record]).collect()
        if outcome[1] is not None:
            assert outcome[1] in str(caught.value)

    def _run(self, records: list[SourceRecord]) -> Any:
        """The records through our engine, as a lazy DataFrame of `row` and the record."""
        if self.load_error is not None:
            raise self.load_error
        from pyspark.sql.types import (
            ArrayType,
            BinaryType,
            IntegerType,
            StringType,
            StructField,
            StructType,
        )

        headers = ArrayType(
            StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        )
        kafka = [
            StructField("key", BinaryType()),
            StructField("topic", StringType()),
            StructField("headers", headers),
            StructField("row", IntegerType()),
        ]
        rows = [
            (record.key, TOPIC, list(record.headers), int(record.headers[0][1] or b"")) for record in records
        ]
        if self.case.mode == "WRITE":
            record_type = avro.struct_type(self.parsed)
            values = [avro.avro_to_spark_value(dict(record.value), self.parsed) for record in records]
            df = self.spark.createDataFrame(
                [
                    (*(value[f.name] for f in record_type.fields), *row)
                    for value, row in zip(values, rows, strict=True)
                ],
                StructType([*record_type.fields, *kafka]),
            )
            return self.contract.serialize(df).select("row", "value")
        framed = written_by_reference(self.case.contract, records, SUBJECT, TOPIC)
        df = self.spark.createDataFrame(
            [(value, *row) for value, row in zip(framed, rows, strict=True)],
            StructType([StructField("value", BinaryType()), *kafka]),
        )
        return self.contract.deserialize(df, key_col="key")

    def _record(self, row: Any) -> dict[str, Any]:
        if self.case.mode == "WRITE":
            value = bytes(row["value"])
            assert value[:5] == b"\x00" + self.contract.schema_id.to_bytes(4, "big")
            return decode(self.case.contract, value)
        names = [f["name"] for f in json.loads(self.case.contract.schema_text)["fields"]]
        return avro.spark_to_avro_value({name: row[name] for name in names}, self.parsed)


def test_read_input_is_written_with_the_rule_less_first_version() -> None:
    """Both sides read bytes framed with schema id 1, the version registered without rules."""
    case = next(case for case in CASES if case.mode == "READ")
    framed = written_by_reference(case.contract, case.records[:1], SUBJECT, TOPIC)
    assert framed[0][:5] == b"\x00" + PLAIN_VERSION_ID.to_bytes(4, "big")
