# Thin entry point: every target calls Python in scripts/ (see README.md).
PYTHON   ?= python3
VENV     ?= .venv
BUILD    ?= build
SOURCE   ?= wheel
SGLANG_DIR ?=
THREE_WAY ?=
VERSION  ?=
BENCH_ARGS ?=
PYTEST_ARGS ?=

ifneq ($(filter-out 0 1,$(value THREE_WAY)),)
$(error THREE_WAY must be 0 or 1, got '$(value THREE_WAY)')
endif

# The values above reach recipes only through the environment: a recipe reads
# "$$SGLPATCH_MK_X" (one word, never re-read as shell code) and no recipe line
# holds $(X) itself, so quotes, backticks, $$(...) or ';' in a value stay data.
# Word lists (PYTEST_ARGS, BENCH_ARGS) are split by pytest (PYTEST_ADDOPTS) or
# by the shell with globbing off.
export SGLPATCH_MK_PYTHON = $(PYTHON)
export SGLPATCH_MK_VENV = $(VENV)
export SGLPATCH_MK_BUILD = $(BUILD)
export SGLPATCH_MK_SOURCE = $(SOURCE)
export SGLPATCH_MK_SGLANG_DIR = $(SGLANG_DIR)
export SGLPATCH_MK_VERSION = $(VERSION)
export SGLPATCH_MK_BENCH_ARGS = $(BENCH_ARGS)
export SGLPATCH_MK_PYTEST_ARGS = $(PYTEST_ARGS)

VPY  := "$$SGLPATCH_MK_VENV/bin/python"
TOOL := PYTHONPATH=scripts "$$SGLPATCH_MK_PYTHON" -m sglpatch --build "$$SGLPATCH_MK_BUILD"

.DEFAULT_GOAL := help
.PHONY: help apply export check-patches check-upstream bundle venv test lint bench clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

apply: ## Build $(BUILD)/sglang = base + patches/series (SGLANG_DIR=<checkout> [THREE_WAY=1]: a fork; SOURCE=wheel|git)
	$(TOOL) apply --source "$$SGLPATCH_MK_SOURCE" $(if $(value SGLANG_DIR),--sglang-dir "$$SGLPATCH_MK_SGLANG_DIR") $(if $(filter 1,$(value THREE_WAY)),--three-way)

export: ## Regenerate patches/*.patch and patches/series from the commits above the base tag
	$(TOOL) export

check-patches: apply ## Fail if patches/ differs from a fresh export or series and directory disagree
	$(TOOL) check-patches

check-upstream: ## Report per patch against a newer release: VERSION=X.Y.Z
	$(TOOL) check-upstream --version "$$SGLPATCH_MK_VERSION"

bundle: apply ## Offline bundle for air-gapped GPU hosts (cp312 wheels + both trees) in $(BUILD)/bundle
	$(TOOL) bundle

venv: $(VENV)/.installed ## Create the pinned virtual environment (.venv)

$(VENV)/.installed: ci/requirements.txt
	"$$SGLPATCH_MK_PYTHON" -m venv "$$SGLPATCH_MK_VENV"
	$(VPY) -m pip install -q --disable-pip-version-check -r ci/requirements.txt
	touch "$$SGLPATCH_MK_VENV/.installed"

test: venv apply ## Run the test suite (CPU under TRITON_INTERPRET=1; GPU tests too when CUDA is visible)
	PYTEST_ADDOPTS="$${PYTEST_ADDOPTS:-} $$SGLPATCH_MK_PYTEST_ARGS" $(VPY) -m pytest

lint: venv apply ## pre-commit: upstream's hooks on the patched files, ruff on this project's code
	"$$SGLPATCH_MK_VENV/bin/pre-commit" run --all-files --show-diff-on-failure
	PYTHONPATH=scripts $(VPY) -m sglpatch --build "$$SGLPATCH_MK_BUILD" lint-patched --pre-commit "$$SGLPATCH_MK_VENV/bin/pre-commit"

bench: venv apply ## EAGLE metadata benchmark, base vs patched (BENCH_ARGS="--help" for flags)
	set -f; PYTHONPATH=scripts $(VPY) -m mla_bench --build "$$SGLPATCH_MK_BUILD" $$SGLPATCH_MK_BENCH_ARGS

clean: ## Remove $(BUILD) (the wheel cache included) and .venv
	rm -rf -- "$$SGLPATCH_MK_BUILD" "$$SGLPATCH_MK_VENV"
