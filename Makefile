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

ifneq ($(filter-out 0 1,$(THREE_WAY)),)
$(error THREE_WAY must be 0 or 1, got '$(THREE_WAY)')
endif

VPY  := $(VENV)/bin/python
TOOL := PYTHONPATH=scripts $(PYTHON) -m sglpatch --build $(BUILD)

.DEFAULT_GOAL := help
.PHONY: help apply export check-patches check-upstream bundle venv test lint bench clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

apply: ## Build $(BUILD)/sglang = base + patches/series (SGLANG_DIR=<checkout> [THREE_WAY=1]: a fork; SOURCE=wheel|git)
	$(TOOL) apply --source "$(SOURCE)" $(if $(SGLANG_DIR),--sglang-dir "$(SGLANG_DIR)") $(if $(filter 1,$(THREE_WAY)),--three-way)

export: ## Regenerate patches/*.patch and patches/series from the commits above the base tag
	$(TOOL) export

check-patches: apply ## Fail if patches/ differs from a fresh export or series and directory disagree
	$(TOOL) check-patches

check-upstream: ## Report per patch against a newer release: VERSION=X.Y.Z
	$(TOOL) check-upstream --version "$(VERSION)"

bundle: apply ## Offline bundle for air-gapped GPU hosts (cp312 wheels + both trees) in $(BUILD)/bundle
	$(TOOL) bundle

venv: $(VENV)/.installed ## Create the pinned virtual environment (.venv)

$(VENV)/.installed: ci/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -r ci/requirements.txt
	touch $@

test: venv apply ## Run the test suite (CPU under TRITON_INTERPRET=1; GPU tests too when CUDA is visible)
	$(VPY) -m pytest $(PYTEST_ARGS)

lint: venv apply ## pre-commit: upstream's hooks on the patched files, ruff on this project's code
	$(VENV)/bin/pre-commit run --all-files --show-diff-on-failure
	PYTHONPATH=scripts $(VPY) -m sglpatch --build $(BUILD) lint-patched --pre-commit $(VENV)/bin/pre-commit

bench: venv apply ## EAGLE metadata benchmark, base vs patched (BENCH_ARGS="--help" for flags)
	PYTHONPATH=scripts $(VPY) -m mla_bench --build $(BUILD) $(BENCH_ARGS)

clean: ## Remove $(BUILD) (the wheel cache included) and .venv
	rm -rf $(BUILD) $(VENV)
