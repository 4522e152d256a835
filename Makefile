PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Flink for the side-by-side benchmark: a virtualenv of its own, never the project's
FLINK_VENV := benchmarks/.flink-venv
FLINK_STAMP := $(FLINK_VENV)/.installed

.PHONY: demo test test-slow test-flinkcep bench bench-quick bench-runtime bench-replay bench-rules bench-state bench-spark bench-flink lint docs clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,viz,docs]'
	$(BIN)/python -m cep.nfa.warmup
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP)
	$(BIN)/python -m cep.runtime.spark.session
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-slow: $(STAMP) $(FLINK_STAMP)
	$(BIN)/python -m cep.runtime.spark.session
	CEP_HYPOTHESIS_PROFILE=random $(BIN)/python -m pytest -q -m slow
	$(BIN)/python -m tests.flinkcep.run

# random patterns and streams on the real FlinkCEP and on cep, compared (tests/flinkcep)
test-flinkcep: $(STAMP) $(FLINK_STAMP)
	$(BIN)/python -m tests.flinkcep.run

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks.run --quick

bench-runtime: $(STAMP)
	$(BIN)/python -m benchmarks.runtime

bench-replay: $(STAMP)
	$(BIN)/python -m benchmarks.replay

bench-rules: $(STAMP)
	$(BIN)/python -m benchmarks.rules

bench-state: $(STAMP)
	$(BIN)/python -m benchmarks.state

bench-spark: $(STAMP)
	$(BIN)/python -m cep.runtime.spark.session
	$(BIN)/python -m benchmarks.spark

$(FLINK_STAMP):
	java -version 2>&1 | grep -q 'version "17' || (echo "Flink needs Java 17 on PATH" && exit 1)
	test -x $(FLINK_VENV)/bin/python || $(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLINK_VENV)/bin/python -m pip install --quiet 'apache-flink==2.3.*'
	touch $(FLINK_STAMP)

bench-flink: $(STAMP) $(FLINK_STAMP)
	$(BIN)/python -m benchmarks.flink

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # the variable silences a Material banner

clean:
	rm -rf $(VENV) $(FLINK_VENV) build *.egg-info
