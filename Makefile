# Everything a user runs. Values given on the command line (MODEL=..., ENV=...) reach the harness
# as arguments, never through a shell string.
PYTHON ?= python3
VENV := .venv
HARNESS := $(VENV)/bin/harness
STAMP := $(VENV)/.installed

MODEL ?=
ENV ?=
BACKEND ?=
ARGS ?=

profile_flags = $(if $(ENV),--env "$(ENV)") $(if $(BACKEND),--backend "$(BACKEND)")

.PHONY: setup profile doctor test lint

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[dev]"
	touch $(STAMP)

profile: $(STAMP)
	@test -n "$(MODEL)" || { echo "make profile: set MODEL=path/to/model.onnx (several: MODEL=\"a.onnx b.onnx\")"; exit 2; }
	$(HARNESS) profile $(MODEL) $(profile_flags) $(ARGS)

doctor: $(STAMP)
	$(HARNESS) doctor

lint: $(STAMP)
	$(VENV)/bin/ruff check harness tests bench_scripts benchmarks

test: $(STAMP) lint
	$(VENV)/bin/pytest -q
