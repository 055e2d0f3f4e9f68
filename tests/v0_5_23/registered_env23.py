"""pytest plugin (``-p registered_env23``) for the upstream test files' child runs.

The series' upstream test files (``test_registered23.FILES``) assume upstream's CI: FlashInfer,
sgl_kernel and a GPU. This project's machines have neither package (and the
CPU host no GPU), so the child installs the harness's replacements before the
file imports sglang (``mla_harness.replacements``, each with its reason):
1, 3, 5 (``prepare_environment``), 2 (``install_flashinfer_wrappers``), 9-11
(``install_construction_stand_ins``), and on CPU 4 and 12 for the whole run
(``cuda_factories_on_cpu``, ``unpinned_host_on_cpu``: the constructors'
hard-coded ``device="cuda"`` factories and pinned host buffers). The device
comes from ``REGTEST_DEVICE`` ("cpu" or "cuda").

FlashInfer: SGLang imports it where ``is_flashinfer_available()`` (importable
and CUDA); there 1, 2 and 9 are not installed and the backends are built on
the real package (its MLA and ragged prefill wrappers, the multi-CTA counter
buffer). ``REGTEST_FLASHINFER`` says which the run must use: ``auto``
(default: whichever SGLang takes), ``real`` (the child stops at configure
unless SGLang imported FlashInfer) or ``absent`` (1, 2 and 9 even where it is
installed). The child's summary says which it used (a ``flashinfer:`` line).

And 20: ``datasets`` (when not installed) is served as an absent module
(replacement 3's mechanism). ``sglang.test.test_utils``
(``CustomTestCase``) imports the serving benchmark, which imports it at
module load; nothing the file runs calls it. And 22: ``setproctitle``,
``uvicorn`` and ``fastapi`` (when not installed), inert modules: the kit-fix
file's kit imports ``ModelRunner``, whose import chain imports them; nothing
the file runs calls them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys

import pytest

from mla_harness import replacements

USE_CUDA = os.environ.get("REGTEST_DEVICE", "cpu") == "cuda"
FLASHINFER = os.environ.get("REGTEST_FLASHINFER", "auto")
if FLASHINFER not in ("auto", "real", "absent"):
    raise SystemExit(f"REGTEST_FLASHINFER must be auto, real or absent, not {FLASHINFER!r}")
if FLASHINFER == "absent":
    os.environ["SGLANG_IS_FLASHINFER_AVAILABLE"] = "false"  # replacement 1, as where absent
replacements.prepare_environment(USE_CUDA)
if importlib.util.find_spec("datasets") is None:
    sys.meta_path.insert(0, replacements._AbsentFinder(["datasets"]))
replacements.install_inert_modules(replacements.SERVER_MODULES)
_modes = contextlib.ExitStack()


def pytest_configure(config):
    from sglang.srt.layers.attention import trtllm_mla_backend

    if FLASHINFER == "real" and not replacements.flashinfer_in_use(trtllm_mla_backend):
        raise pytest.UsageError(
            "REGTEST_FLASHINFER=real, but SGLang did not import FlashInfer (it does where"
            " is_flashinfer_available(): importable and CUDA)"
        )
    replacements.install_flashinfer_wrappers()
    replacements.install_construction_stand_ins(trtllm_mla_backend, USE_CUDA)
    _modes.enter_context(replacements.cuda_factories_on_cpu(USE_CUDA))
    _modes.enter_context(replacements.unpinned_host_on_cpu(USE_CUDA))


def pytest_terminal_summary(terminalreporter):
    """The FlashInfer the run used, in one line (shown under -q too)."""
    from sglang.srt.layers.attention import trtllm_mla_backend

    if replacements.flashinfer_in_use(trtllm_mla_backend):
        module = trtllm_mla_backend.flashinfer
        line = f"real {module.__version__} ({os.path.dirname(module.__file__)})"
    else:
        line = "replaced (1, 2, 9)"
    terminalreporter.write_line(f"flashinfer: {line}")


def pytest_unconfigure(config):
    _modes.close()
