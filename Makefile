# The two set-up commands: `make dev` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test lint venv clean bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,test]'
	touch $(STAMP)

venv: $(STAMP)

dev: $(STAMP)
	$(BIN)/batchd dev

test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/mypy workflows activities
	$(BIN)/pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/mypy workflows activities

clean:
	rm -rf $(VENV) .batchd
