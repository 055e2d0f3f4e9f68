# Thin entry point: every target calls Python in scripts/ (see README.md).
PYTHON   ?= python3
VENV     ?= .venv
BUILD    ?= build
SOURCE   ?= wheel
BASE     ?=
SGLANG_DIR ?=
THREE_WAY ?=
VERSION  ?=
BENCH_ARGS ?=
PYTEST_ARGS ?=

ifneq ($(filter-out 0 1,$(value THREE_WAY)),)
$(error THREE_WAY must be 0 or 1, got '$(value THREE_WAY)')
endif

# Recipes run in the repository (this file's folder), so `make -f
# path/Makefile` works from anywhere; BUILD and VENV are relative to it. A
# relative SGLANG_DIR is relative to the folder make was started in: the
# shell's PWD, which `make -C` leaves as it was (a program that starts make
# elsewhere without setting PWD gets its own; errors name the path tried).
MAKEFILE := $(abspath $(lastword $(MAKEFILE_LIST)))
ROOT := $(patsubst %/,%,$(dir $(MAKEFILE)))
# make splits file names at spaces (ROOT above, the venv's stamp below): a
# repository whose path holds one is refused, in one line that names it.
ifneq ($(words $(MAKEFILE))$(wildcard $(MAKEFILE)),1$(MAKEFILE))
$(error this Makefile's path, '$(if $(filter /%,$(firstword $(MAKEFILE_LIST))),,$(CURDIR)/)$(strip $(MAKEFILE_LIST))', holds a space, and make splits file names at spaces: clone or move the repository to a path without one)
endif

# The values above reach recipes only through the environment, as the text the
# user typed ($(value X): make expands nothing in it, so $(shell ...) or a '$'
# in a path stays data): a recipe reads "$$SGLPATCH_MK_X" (one word, never
# re-read as shell code) and no recipe line holds $(X) itself, so quotes,
# backticks, $$(...) or ';' in a value stay data. Recipes are silent (@): what
# a target prints is its program's own lines.
# Word lists (PYTEST_ARGS, BENCH_ARGS) are split by pytest (PYTEST_ADDOPTS) or
# by the shell with globbing off.
# make itself exports a variable set on the command line, expanding it: not these.
unexport PYTHON VENV BUILD SOURCE BASE SGLANG_DIR THREE_WAY VERSION BENCH_ARGS PYTEST_ARGS
export SGLPATCH_MK_PYTHON = $(value PYTHON)
export SGLPATCH_MK_VENV = $(value VENV)
export SGLPATCH_MK_BUILD = $(value BUILD)
export SGLPATCH_MK_SOURCE = $(value SOURCE)
export SGLPATCH_MK_BASE = $(value BASE)
export SGLPATCH_MK_SGLANG_DIR = $(value SGLANG_DIR)
export SGLPATCH_MK_THREE_WAY = $(value THREE_WAY)
export SGLPATCH_MK_VERSION = $(value VERSION)
export SGLPATCH_MK_BENCH_ARGS = $(value BENCH_ARGS)
export SGLPATCH_MK_PYTEST_ARGS = $(value PYTEST_ARGS)
export SGLPATCH_MK_ROOT = $(ROOT)
export SGLPATCH_MK_MAKEFILE = $(MAKEFILE)
export SGLPATCH_MK_CALLER_DIR = $(or $(value PWD),$(CURDIR))

IN_ROOT := cd "$$SGLPATCH_MK_ROOT" &&
VPY  := "$$SGLPATCH_MK_VENV/bin/python"
TOOL := $(IN_ROOT) PYTHONPATH=scripts "$$SGLPATCH_MK_PYTHON" -m sglpatch --build "$$SGLPATCH_MK_BUILD"
# BASE (a name of patches/bases.toml, checked by the programs) picks one base;
# empty, apply, check-patches, lint and test go over every base and the other
# targets take the default base. One word, "--base=...", whatever it holds.
ONE_BASE  := $(if $(value BASE),"--base=$$SGLPATCH_MK_BASE")
EACH_BASE := $(if $(value BASE),"--base=$$SGLPATCH_MK_BASE",--all-bases)
# SGLANG_DIR set by the user (on the command line or in the environment), even
# empty: a fork apply (an empty one is refused by sglpatch, never taken for a
# build apply).
FORK := $(filter command environment,$(firstword $(origin SGLANG_DIR)))
# make's own name for the venv's stamp file (VENV is relative to ROOT).
VENV_STAMP := $(if $(filter /%,$(value VENV)),$(value VENV),$(ROOT)/$(value VENV))/.installed

.DEFAULT_GOAL := help
.PHONY: help apply export check-patches check-upstream bundle flashinfer venv test lint bench clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {gsub(/\$$\(BUILD\)/, ENVIRON["SGLPATCH_MK_BUILD"], $$2); gsub(/\$$\(VENV\)/, ENVIRON["SGLPATCH_MK_VENV"], $$2); printf "  %-16s %s\n", $$1, $$2}' "$$SGLPATCH_MK_MAKEFILE"

apply: ## Build $(BUILD)/<base>/sglang = base + patches/<base>/series, every base or BASE=<name> (SGLANG_DIR=<checkout> [THREE_WAY=1]: a fork; SOURCE=wheel|git)
	@$(TOOL) $(if $(FORK),$(ONE_BASE),$(EACH_BASE)) apply --source "$$SGLPATCH_MK_SOURCE" $(if $(FORK),--sglang-dir "$$SGLPATCH_MK_SGLANG_DIR") $(if $(filter 1,$(value THREE_WAY)),--three-way)

export: ## Regenerate patches/<base>/*.patch and series from the commits above the base tag (BASE=<name>; default: the default base)
	@$(TOOL) $(ONE_BASE) export

check-patches: apply ## Fail if patches/<base>/ differs from a fresh export or series and directory disagree (every base, or BASE=<name>)
	@$(TOOL) $(EACH_BASE) check-patches

check-upstream: ## Per patch against a newer release, what to do (drop, rebase, port): VERSION=X.Y.Z [BASE=<name>]
	@$(TOOL) $(ONE_BASE) check-upstream --version "$$SGLPATCH_MK_VERSION"

bundle: apply ## Offline bundle for air-gapped GPU hosts (cp312 wheels + a base's trees) in $(BUILD)/<base>/bundle (BASE=<name>)
	@$(TOOL) $(ONE_BASE) bundle

flashinfer: ## The real FlashInfer wheels of ci/flashinfer-gpu.toml for GPU hosts, in parts, in $(BUILD)/<base>/flashinfer (BASE=<name>)
	@$(TOOL) $(ONE_BASE) flashinfer

venv: $(VENV_STAMP) ## Create the pinned virtual environment $(VENV) (5.9 GiB)

$(VENV_STAMP): $(ROOT)/ci/requirements.txt
	@$(IN_ROOT) PYTHONPATH=scripts "$$SGLPATCH_MK_PYTHON" -m sglpatch.pyversion
	@echo "make venv: installing ci/requirements.txt into $$SGLPATCH_MK_VENV: 5.9 GiB once installed (torch is a CUDA build); pip shows each package"
	@$(IN_ROOT) "$$SGLPATCH_MK_PYTHON" -m venv "$$SGLPATCH_MK_VENV"
# pip compiles every module it installs: where PYTHONDONTWRITEBYTECODE is set (as on
# the project's 2-core CPU machine) nothing else would, and each of the suite's
# processes would compile what it imports (--no-compile: pytest 837 -> 1038 s).
	@$(IN_ROOT) $(VPY) -m pip install --disable-pip-version-check --progress-bar on -r ci/requirements.txt
	@$(IN_ROOT) touch "$$SGLPATCH_MK_VENV/.installed"

test: venv apply ## Run the test suite for every base, or BASE=<name> (CPU under TRITON_INTERPRET=1; GPU tests too when CUDA is visible)
	@$(IN_ROOT) PYTEST_ADDOPTS="$${PYTEST_ADDOPTS:-} $$SGLPATCH_MK_PYTEST_ARGS" $(VPY) -m pytest $(ONE_BASE)

lint: venv apply ## pre-commit: upstream's hooks on the patched files (every base, or BASE=<name>), ruff on this project's code
	@$(IN_ROOT) "$$SGLPATCH_MK_VENV/bin/pre-commit" run --all-files --show-diff-on-failure
	@$(IN_ROOT) PYTHONPATH=scripts $(VPY) -m sglpatch --build "$$SGLPATCH_MK_BUILD" $(EACH_BASE) lint-patched --pre-commit "$$SGLPATCH_MK_VENV/bin/pre-commit"

bench: venv apply ## EAGLE metadata benchmark, base vs patched (BASE=<name>; default: the default base); its flags go in BENCH_ARGS, e.g. BENCH_ARGS="--quick" (BENCH_ARGS="--help" lists them)
	@set -f && $(IN_ROOT) PYTHONPATH=scripts $(VPY) -m mla_bench --build "$$SGLPATCH_MK_BUILD" $(ONE_BASE) $$SGLPATCH_MK_BENCH_ARGS

clean: ## Remove $(BUILD) (the wheel cache included) and $(VENV)
	@$(IN_ROOT) rm -rf -- "$$SGLPATCH_MK_BUILD" "$$SGLPATCH_MK_VENV"

# Any other goal: one line that points at `make help`. The name reaches the
# shell through the environment, as every value a user types does.
%: export SGLPATCH_MK_GOAL = $@
%:
	@printf "make: no target '%s': \`make help\` lists them\n" "$$SGLPATCH_MK_GOAL" >&2; exit 2
