# eos — the README's two commands are `make run` and `make test`.
# Everything downloaded (pip wheels, Maven jars, the assembled Kafka) is cached
# under .cache/, which this Makefile owns; `make clean-cache` removes it.

PYTHON      ?= python3.11
VENV        := .venv
CACHE       := $(CURDIR)/.cache
BIN         := $(VENV)/bin
STAMP       := $(VENV)/.installed
export PIP_CACHE_DIR := $(CACHE)/pip
export EOS_CACHE_DIR := $(CACHE)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.DEFAULT_GOAL := help
.PHONY: install help run stop test test-pythons lint typecheck unit bench kafka dashboards kubernetes image clean clean-cache

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 (or run make PYTHON=/path/to/python3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install eos with its dev tools

run: $(STAMP) ## the main job: local Kafka + the demo, end to end
	$(BIN)/eos run

stop: $(STAMP) ## stop what `make run` started (worker and local Kafka)
	$(BIN)/eos dev-kafka stop

kafka: $(STAMP) ## start the local Kafka only (eos dev-kafka start)
	$(BIN)/eos dev-kafka start

lint: $(STAMP) ## ruff (lint + format check)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) ## mypy, strict on eos/
	$(BIN)/mypy

unit: $(STAMP) ## unit tests only (no I/O)
	$(BIN)/pytest tests/unit

TEST_WORKERS ?= 2
test: $(STAMP) lint typecheck ## every test (lint, types, unit, integration, system) on TEST_WORKERS processes, with the runtime's and the converters' branch coverage; then test-pythons
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --cov=eos/runtime --cov=eos/converters --cov-branch --cov-report=term:skip-covered
	$(BIN)/python tests/pythons.py

test-pythons: $(STAMP) ## the unit suite and one integration test per subsystem on each other Python (3.11-3.13) the machine has
	$(BIN)/python tests/pythons.py

bench: $(STAMP) ## the benchmark tables under bench/
	@for b in $$(grep -l '^if __name__ == "__main__":' bench/*.py); do echo "== $$b"; $(BIN)/python $$b || exit 1; done

dashboards: $(STAMP) ## regenerate deploy/grafana/dashboards/*.json from their generator
	$(BIN)/python deploy/grafana/build_dashboards.py

kubernetes: $(STAMP) ## the Helm chart's copies of the alerts and dashboards, and the manifests it renders
	$(BIN)/python deploy/kubernetes/build_manifests.py

image: $(STAMP) ## the worker's container images eos:latest and eos:slim (podman; cached in .cache/image)
	$(BIN)/python deploy/image/build_image.py
	$(BIN)/python deploy/image/build_image.py --variant slim

clean: ## remove .venv and tool caches (keeps downloads in .cache)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

clean-cache: ## remove every download (pip, Maven, Kafka jars)
	rm -rf $(CACHE)
