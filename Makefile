# The two commands README.md documents: `make demo` runs the main example, `make test` the test suite.
# Both create .venv and install the project into it first, so a fresh machine needs only
# Python >= 3.10 and Java 17.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz lint install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,kafka]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/orders_pipeline.py

# Classic local[2] session first, then the DataFrame tests again on Spark Connect
# (a classic and a Connect session cannot share one process).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest --durations=25
	SPARK_REMOTE='local[2]' $(BIN)/pytest -m spark --durations=25

# The property tests only, with random seeds and FUZZ_SCALE times their examples (tests/hypothesis_profiles.py):
# exploration for a developer's machine, never CI. Turn what it finds into explicit examples.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -m hypothesis --durations=25 --hypothesis-show-statistics

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
