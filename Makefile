# The two commands README.md documents: `make demo` runs the main example, `make test` the test suite.
# Both create .venv and install the project into it first, so a fresh machine needs only
# Python >= 3.10 and Java 17; `make test` (and `make demo-kafka`) also fetch the Spark connectors
# and a Kafka broker with Maven (`make jars`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JARS := .jars
JARS_STAMP := $(JARS)/.fetched

.PHONY: demo demo-json demo-kafka test bench fuzz lint install jars clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,kafka]'
	touch $(STAMP)

install: $(STAMP)

# spark-sql-kafka and spark-avro for Spark's classpath, and an Apache Kafka broker (KRaft), into
# .jars/ (git-ignored); fetched again only when a pom or the script changes.
$(JARS_STAMP): tools/fetch-jars.sh tools/maven/spark-connectors/pom.xml tools/maven/kafka-broker/pom.xml
	tools/fetch-jars.sh $(JARS)

jars: $(JARS_STAMP)

demo: $(STAMP)
	$(BIN)/python examples/orders_pipeline.py

# Payments under JSON Schema contracts, keys and values each with its own (examples/payments_json.py).
demo-json: $(STAMP)
	$(BIN)/python examples/payments_json.py

# The orders pipeline as a Structured Streaming job on a real Kafka broker, started and stopped here;
# Spark gets its Kafka connector from .jars/ through PYSPARK_SUBMIT_ARGS (what --jars does for spark-submit).
demo-kafka: $(STAMP) $(JARS_STAMP)
	PYSPARK_SUBMIT_ARGS="--jars $$(ls $(CURDIR)/$(JARS)/spark-connectors/*.jar | paste -sd, -) pyspark-shell" \
		$(BIN)/python tools/kafka_broker.py -- $(BIN)/python examples/orders_kafka.py

# Classic local[2] session first, then the DataFrame tests again on Spark Connect
# (a classic and a Connect session cannot share one process). Each pass takes one Avro and one
# JSON Schema decode path for the calls that do not choose theirs: fastavro and the Python JSON
# decoder on the classic pass, spark-avro and `from_json` (the defaults, `auto`) on the Connect
# pass, so each path runs the DataFrame suite; the differential tests run both paths on both passes.
# Tests marked one_pass check what no session type changes: the Connect pass leaves them out.
# On Connect, a test parametrized over a corpus runs a quarter of its cases (tests/conftest.py).
# Beside the Connect pass, the tests marked cluster run on one local-cluster[2,1,1024] session (two
# executor JVMs and their Python workers as separate processes), in a process of their own
# (tests/cluster); mostly waiting on JVMs starting, it costs the Connect pass little. Its output
# is printed when it ends, and either pass failing fails `make test`.
test: $(STAMP) $(JARS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	SPARK_CONTRACTS_AVRO_PATH=python SPARK_CONTRACTS_JSON_PATH=python $(BIN)/pytest -m 'not cluster' --durations=25
	@log=$$(mktemp); \
	$(BIN)/pytest -m cluster --durations=10 > $$log 2>&1 & cluster=$$!; \
	SPARK_REMOTE='local[2]' $(BIN)/pytest -m 'spark and not one_pass' --durations=25; connect=$$?; \
	wait $$cluster; clustered=$$?; cat $$log; rm -f $$log; \
	test $$connect -eq 0 && test $$clustered -eq 0

# Every benchmark in benchmarks/ at a size that fits in about ten minutes on two idle cores, as one
# table of ratios, each against its baseline measured in the same run (benchmarks/bench.py).
bench: $(STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/bench.py

# The property tests only, with random seeds and FUZZ_SCALE times their examples (tests/support/hypothesis_profiles.py):
# exploration for a developer's machine, never CI. Turn what it finds into explicit examples.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -m hypothesis --durations=25 --hypothesis-show-statistics

# mypy checks the public API's modules ([tool.mypy] in pyproject.toml); not in `make test`.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(JARS) .pytest_cache .ruff_cache .mypy_cache .hypothesis
