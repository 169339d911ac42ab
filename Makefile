# The two set-up commands of the README:
#   make demo   builds a venv, fetches real data by package name, builds a store, loads it,
#               and prints throughput beside a plain torch DataLoader
#   make test   builds the venv and runs the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned for development and CI: on these machines 2.13.0 resolves to a CPU build.
TORCH ?= torch==2.13.0
DATA ?= data

.PHONY: install demo test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python scripts/fetch_data.py mnist --out $(DATA)
	$(BIN)/stoker demo --data $(DATA)

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: install
	$(BIN)/python benchmarks/bench_loader.py

clean:
	rm -rf $(VENV) $(DATA) results .pytest_cache .hypothesis
