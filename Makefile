# The whole set-up on a fresh machine is `make demo` or `make test`: each creates .venv,
# installs the project into it, and finds or starts PostgreSQL by itself.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test chaos bench mutate lint format install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/wmsim demo

# bench.ci (the benchmarks' counts and bytes held to their bounds, bench/README.md "CI figures")
# runs as a test of the suite, tests/bench/test_ci_figures.py: run alone before it, its 50 s
# of one core left the other idle.
# Three workers (pytest-xdist) on two cores: most tests wait on processes, sims and Postgres
# (with two, the machine sat a third idle); each worker starts a Postgres of its own. An idle
# worker steals queued tests from a busy one (worksteal): `load` left a queue of slow tests on
# one worker at the end. 20 min with -n 2 and load, 18 with -n 3, 14 with both (make test).
# Bytecode is written (the sandbox's PYTHONDONTWRITEBYTECODE=1 would have every pytest worker
# and every process a test starts compile wm, wmsim and the tests from source again).
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -n 3 --dist worksteal --durations=25

# The chaos scenarios' long form: bigger sizes and repetitions; every test is bounded in time.
chaos: $(STAMP)
	$(BIN)/pytest tests/chaos -m chaos_long

# Every benchmark with its defaults, one after the other (about 46 minutes on 4e7e23a;
# bench/README.md), then bench.check: each figure against its goal in bench/README.md (fails
# if one falls short).
bench: $(STAMP)
	$(BIN)/python -m bench.burst
	$(BIN)/python -m bench.scan
	$(BIN)/python -m bench.azure
	$(BIN)/python -m bench.isolation
	$(BIN)/python -m bench.scale
	$(BIN)/python -m bench.registration
	$(BIN)/python -m bench.launch_choice
	$(BIN)/python -m bench.launch_choice_e2e --scenarios S0 S1 S2 S3
	$(BIN)/python -m bench.check

# Mutation testing of the pure decision modules (tools/mutate.py, README "Mutation testing"):
# the score per module and every surviving mutant. Minutes, so not part of `make test`.
MUTATE_STAMP := $(VENV)/.mutate-stamp

$(MUTATE_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[mutate]'
	touch $(MUTATE_STAMP)

mutate: $(MUTATE_STAMP)
	$(BIN)/python tools/mutate.py

lint: $(STAMP)
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache mutants
