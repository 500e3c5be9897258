# Everything a user runs. Values given on the command line (MODEL=..., ENV=..., CPUS=...) reach the harness
# as environment variables read in Python, never spliced into a shell command.
PYTHON ?= python3
VENV := .venv
HARNESS := $(VENV)/bin/harness
STAMP := $(VENV)/.installed

# User values travel to the harness as environment variables (split with shlex in Python), so a
# model name with spaces or shell characters is never interpreted by a shell.
export HARNESS_MODEL := $(MODEL)
export HARNESS_ENV_FILE := $(ENV)
export HARNESS_BACKEND := $(BACKEND)

.PHONY: setup profile doctor test lint bench

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[dev]"
	touch $(STAMP)

profile: $(STAMP)
	$(HARNESS) profile

doctor: $(STAMP)
	$(HARNESS) doctor

lint: $(STAMP)
	$(VENV)/bin/ruff check harness tests bench_scripts benchmarks

test: $(STAMP) lint
	$(VENV)/bin/pytest -q

# Model zoo (torch, torchvision, onnxscript: several GB from the package index), kept out of `make setup`.
# `make test` installs it too, so the zoo tests run in CI.
ZOO_STAMP := $(VENV)/.installed-zoo
.PHONY: setup-zoo
setup-zoo: $(ZOO_STAMP)

$(ZOO_STAMP): $(STAMP) pyproject.toml
	$(VENV)/bin/pip install --quiet -e ".[dev,zoo]"
	touch $(ZOO_STAMP)

test: $(ZOO_STAMP)

# Extra options for every run container (only volumes, env and devices; see README, "Docker backend").
export HARNESS_DOCKER_ARGS := $(DOCKER_ARGS)

# Docker runtime image for BACKEND=docker, tagged with the profile's IMAGE. BASE_IMAGE, TORCH=1 and
# LITERT=1 reach `harness image` as environment variables, never through a shell string.
BASE_IMAGE ?= python:3.11-slim
.PHONY: image
image: export HARNESS_BASE_IMAGE := $(BASE_IMAGE)
image: export HARNESS_IMAGE_TORCH := $(TORCH)
image: export HARNESS_IMAGE_LITERT := $(LITERT)
image: $(STAMP)
	$(HARNESS) image

# Calibration and reports. DEVICE, METRIC, GROUP_BY and SESSION reach the harness as environment variables
# (read as argparse defaults), never through a shell string.
.PHONY: regress report
regress report: export HARNESS_DEVICE := $(DEVICE)
regress report: export HARNESS_METRIC := $(METRIC)
regress report: export HARNESS_GROUP_BY := $(GROUP_BY)
regress report: export HARNESS_SESSION := $(SESSION)

regress: $(STAMP)
	$(HARNESS) regress

report: $(STAMP)
	$(HARNESS) report

# CPU sweeps: MODEL and CPUS (a comma list, e.g. CPUS=1,2,4) as environment variables, as for profile.
.PHONY: sweep experiment-1
sweep: export HARNESS_CPUS_LIST := $(CPUS)
sweep: $(ZOO_STAMP)
	$(HARNESS) sweep

# The seed's Experiment I: InceptionV3, SqueezeNet and MobileNetV2 0.25-1.0 at CPUS 1, 2 and 4 (capped at
# this host's cores, with a note), 2 GB memory, 5 repeats; one session, one report.
EXPERIMENT_1_MODELS := inception_v3 squeezenet1_0 mobilenet_v2_0.25_224 mobilenet_v2_0.5_224 \
	mobilenet_v2_0.75_224 mobilenet_v2_1.0_224
experiment-1: $(ZOO_STAMP)
	$(HARNESS) sweep $(EXPERIMENT_1_MODELS) --cpus 1,2,4 --memory 2g --repeats 5 --iterations 100 --warmup 10 \
		--device-name experiment-1

.PHONY: test-slow
test-slow: $(ZOO_STAMP) lint
	$(VENV)/bin/pytest -q -m "slow or not slow"

# Fidelity and overhead benchmarks (not tests: never part of `make test`). Each prints its table and writes
# results/bench/<name>.json; the last table lists every goal, met or missed and why. About 7 minutes. The
# Docker rows need an engine and the image (`make image`); without them they are skipped, with a note.
BENCHMARKS := sampling_overhead peak_fidelity overhead latency cpu_limits noise_floor
bench: $(ZOO_STAMP)
	for name in $(BENCHMARKS); do $(VENV)/bin/python benchmarks/$$name.py || exit 1; done
	$(VENV)/bin/python benchmarks/goals.py $(BENCHMARKS)

# Zoo MACs against published counts, and float vs int8 under the Jetson Nano preset (about a minute once cached).
BENCHMARKS += zoo_facts
