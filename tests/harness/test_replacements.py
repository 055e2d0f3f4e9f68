"""The harness's replacements stay what replacements.py says they are."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from mla_harness import subprocess_env

CHILD = """
import importlib.util, sys
from mla_harness import replacements
replacements.prepare_environment(use_cuda=True)
assert importlib.util.find_spec("deep_gemm") is not None
from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor as f
import sgl_kernel
from sgl_kernel.flash_attn import flash_attn_varlen_func as g
try:
    f(1)
except AssertionError as e:
    assert "deep_gemm.utils.layout.get_mn_major_tma_aligned_tensor was called" in str(e)
else:
    raise SystemExit("a call into an absent package must fail")
print("ok")
"""


def test_absent_cuda_packages_import_but_refuse_calls():
    """Submodules of absent CUDA-only packages import (SGLang imports them at
    module load on CUDA hosts); calling anything from them fails the test."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=subprocess_env(), capture_output=True, text=True
    )
    if "already installed" in proc.stdout:
        pytest.skip("real packages installed")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


PDL_CHILD = """
from mla_harness import replacements
replacements.prepare_environment(use_cuda=True)
import torch
from sgl_kernel.utils import is_arch_support_pdl
from sgl_kernel import utils
torch.cuda.current_device = lambda: 0
answers = []
for capability in ((8, 9), (9, 0), (10, 0), (12, 0)):
    torch.cuda.get_device_capability = lambda device, c=capability: c
    is_arch_support_pdl.cache_clear()
    answers.append(is_arch_support_pdl())
torch.cuda.get_device_capability = lambda device: (8, 0)
assert is_arch_support_pdl() is True  # cached, as the real one (lru_cache, maxsize 1)
try:
    utils.get_cuda_stream()
except AssertionError as e:
    assert "sgl_kernel.utils.get_cuda_stream was called" in str(e)
else:
    raise SystemExit("every other name of the absent package must refuse calls")
print(answers)
"""


def test_absent_sgl_kernel_answers_is_arch_support_pdl_as_sgl_kernel_does():
    """Replacement 23: v0.5.23's Triton backend asks ``sgl_kernel.utils.
    is_arch_support_pdl()`` when constructed on CUDA; the stand-in answers as
    sgl-kernel's: compute capability major >= 9 (here the capability is
    faked, this host has no GPU), and still refuses every other call."""
    if importlib.util.find_spec("sgl_kernel") is not None:
        pytest.skip("sgl_kernel is installed")
    proc = subprocess.run(
        [sys.executable, "-c", PDL_CHILD], env=subprocess_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[False, True, True, True]"


@pytest.mark.base("v0.5.23")
def test_the_triton_backend_imports_only_what_the_stand_in_defines(trees_of):
    """Replacement 23's table covers what v0.5.23's ``triton_backend.py``
    imports from ``sgl_kernel.utils`` (on CUDA, at module load), on both trees."""
    for tree in trees_of("v0.5.23").values():
        source = tree / "sglang" / "srt" / "layers" / "attention" / "triton_backend.py"
        _imports_only_what_the_stand_in_defines(source, "sgl_kernel.utils", {"is_arch_support_pdl"})


def _imports_only_what_the_stand_in_defines(source: Path, module: str, names: set) -> None:
    """``source`` imports exactly ``names`` from ``module``, each defined by
    the absent module's stand-in (``ABSENT_FUNCTIONS``)."""
    import ast

    from mla_harness.replacements import ABSENT_FUNCTIONS

    imported = {
        alias.name
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
    }
    assert imported == names, (source, imported)
    assert imported <= set(ABSENT_FUNCTIONS[module])


def test_inert_flashinfer_wrapper_refuses_use():
    from mla_harness.replacements import InertWrapper

    wrapper = InertWrapper("workspace", "NHD", backend="auto")
    with pytest.raises(AssertionError, match="used by the trtllm path"):
        wrapper.plan()


OPS_CHILD = """
from mla_harness import replacements
replacements.prepare_environment(use_cuda=True)
import torch
op = torch.ops.sgl_kernel.moe_fused_gate
@torch.library.register_fake("sgl_kernel::moe_fused_gate")
def _fake(input_tensor, bias, num_expert_group, topk_group, topk, num_fused_shared_experts=0,
          routed_scaling_factor=0, apply_routed_scaling_factor_on_output=False):
    return []
try:
    op(torch.zeros(1), torch.zeros(1), 1, 1, 1)
except NotImplementedError:
    print("ok")
"""


def test_fake_registered_ops_have_no_kernel():
    """Replacement 8: SGLang's register_fake for sgl_kernel ops succeeds without
    sgl_kernel, and the op itself cannot run."""
    if importlib.util.find_spec("sgl_kernel") is not None:
        pytest.skip("sgl_kernel is installed")
    proc = subprocess.run(
        [sys.executable, "-c", OPS_CHILD], env=subprocess_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_unusable_stand_in_refuses_use():
    """Replacements 9 and 10: what a v0.5.23 constructor stores and the path
    under test never uses fails the test on any use."""
    from mla_harness.replacements import construction_stand_ins

    for name, stand_in in construction_stand_ins(use_cuda=False, flashinfer=False).items():
        if name.startswith(("can_use_", "is_")):
            continue
        value = stand_in(*([None] * stand_in.__code__.co_argcount))
        with pytest.raises(AssertionError, match="the path under test needs the real one"):
            value.data_ptr()
        with pytest.raises(AssertionError, match="the path under test needs the real one"):
            value()


def test_construction_stand_ins_per_host():
    """Replacement 11 only on CPU (a GPU answers the capability check
    itself); 9 only where SGLang did not import FlashInfer; 10 everywhere."""
    from mla_harness.replacements import construction_stand_ins

    cpu = construction_stand_ins(use_cuda=False, flashinfer=False)
    gpu = construction_stand_ins(use_cuda=True, flashinfer=False)
    real = construction_stand_ins(use_cuda=True, flashinfer=True)
    assert cpu["can_use_set_mla_kv_concat_q"]() is False
    assert cpu["can_use_set_mla_kv_concat_q_fp8"]() is False
    assert not {"can_use_set_mla_kv_concat_q", "can_use_set_mla_kv_concat_q_fp8"} & set(gpu)
    assert all("_jit_fixup_module" in s for s in (cpu, gpu, real))
    counter = "make_persistent_multi_ctas_kv_counter_buffer"
    assert counter in cpu and counter in gpu and counter not in real


def test_flashinfer_in_use_reads_what_sglang_imported():
    """Replacement 9's condition: the backend module's own ``flashinfer``
    global (SGLang imports it only where is_flashinfer_available()), not
    whether FlashInfer is importable (it is not used on CPU even then)."""
    import types

    from mla_harness.replacements import flashinfer_in_use

    module = types.ModuleType("trtllm_mla_backend")
    assert not flashinfer_in_use(module)
    module.flashinfer = types.ModuleType("flashinfer")
    assert flashinfer_in_use(module)


def test_stand_ins_refuse_a_module_without_the_name():
    """A replacement whose target is gone (another SGLang release) fails loudly."""
    import types

    from mla_harness.replacements import install_construction_stand_ins

    with pytest.raises(AssertionError, match="update replacements.py"):
        install_construction_stand_ins(types.ModuleType("trtllm_mla_backend"), use_cuda=False)


def test_unpinned_host_on_cpu_only_drops_pinning():
    """Replacement 12: same shape and dtype, not pinned; nothing else changes."""
    import torch

    from mla_harness.replacements import unpinned_host_on_cpu

    with unpinned_host_on_cpu(use_cuda=False):
        t = torch.zeros((3,), dtype=torch.int32, device="cpu", pin_memory=True)
    assert t.shape == (3,) and t.dtype == torch.int32 and not t.is_pinned()


def test_tvm_ffi_is_the_real_package():
    """v0.5.23's import chain subclasses ``tvm_ffi.Object``
    (``kernels/ops/communication/all_reduce.py``): the real apache-tvm-ffi is
    installed, and nothing in replacements.py stands in for it."""
    import tvm_ffi

    from mla_harness import replacements

    assert isinstance(tvm_ffi.Object, type)
    # The imported module is the file the installed distribution ships (in a
    # virtualenv or the GPU bundle's --target folder alike), not a stand-in.
    dist = importlib.metadata.distribution("apache-tvm-ffi")
    shipped = Path(dist.locate_file("tvm_ffi/__init__.py")).resolve()
    assert Path(tvm_ffi.__file__ or "").resolve() == shipped
    assert "tvm_ffi" not in replacements.CUDA_ONLY_MODULES


INERT_CHILD = """
import sys
from mla_harness import replacements
replacements.install_inert_modules(("no_such_server_package",))
import no_such_server_package
from no_such_server_package.sub import App
class Sub(App):
    pass
Sub()(1).anything(2)
print("ok")
"""


def test_inert_server_modules_import():
    """Replacements 18 and 22: an absent server package imports, its names
    are classes (subclassed and called at import time), and nothing of it
    does anything."""
    proc = subprocess.run(
        [sys.executable, "-c", INERT_CHILD], env=subprocess_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


WEAK_REF_CHILD = """
import torch
from mla_harness import replacements
replacements.prepare_environment(use_cuda=False)
from sgl_kernel import weak_ref_tensor
base = torch.arange(60.0).view(6, 10)
view = base[1:, 2:7:2]  # an offset and strides
ref = weak_ref_tensor(view)
same = (
    ref.data_ptr() == view.data_ptr(),
    ref.shape == view.shape,
    ref.stride() == view.stride(),
    ref.dtype == view.dtype,
)
base.add_(1)  # the same memory: a write through the original shows
print(all(same) and torch.equal(ref, view))
"""


def test_absent_sgl_kernel_weak_ref_tensor_views_the_same_memory():
    """Replacement 25: the breakable backend's capture calls
    ``sgl_kernel.weak_ref_tensor`` on CUDA; the stand-in returns a tensor over
    the same memory (data pointer with its offset, sizes, strides, dtype), as
    sgl-kernel's ``from_blob`` view does."""
    if importlib.util.find_spec("sgl_kernel") is not None:
        pytest.skip("sgl_kernel is installed")
    proc = subprocess.run(
        [sys.executable, "-c", WEAK_REF_CHILD],
        env=subprocess_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


@pytest.mark.base("v0.5.23")
def test_the_breakable_backend_imports_only_what_the_stand_in_defines(trees_of):
    """Replacement 25's table covers what v0.5.23's weak_ref_tensor module
    imports from ``sgl_kernel`` on CUDA, on both trees."""
    for tree in trees_of("v0.5.23").values():
        source = tree / "sglang" / "srt" / "model_executor" / "runner_backend_utils"
        source = source / "weak_ref_tensor.py"
        _imports_only_what_the_stand_in_defines(source, "sgl_kernel", {"weak_ref_tensor"})


OVERFLOW_CHILD = """
import dataclasses
import torch
from mla_harness import replacements
replacements.prepare_environment(use_cuda=False)
import triton
import triton.language as tl
from triton.runtime import interpreter

@triton.jit
def kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask)
    b = tl.load(y + offs, mask)
    tl.store(out + offs, a * 3 + b - 7, mask)

x = torch.tensor([2**31 - 1, 5, -(2**31), 1000], dtype=torch.int32)
y = torch.tensor([1, 2, -1, 2**30], dtype=torch.int32)
builder = interpreter.interpreter_builder
outs = []
for sanitize in (False, True):  # as replaced, then the interpreter's default
    assert builder.options.sanitize_overflow is sanitize and not builder.options.debug
    out = torch.zeros(4, dtype=torch.int32)
    kernel[(1,)](x, y, out, 4, BLOCK=4)
    outs.append(out)
    builder.options = dataclasses.replace(builder.options, sanitize_overflow=True)
print(torch.equal(*outs) and torch.equal(outs[0], (x * 3 + y - 7).to(torch.int32)))
"""


def test_the_interpreters_overflow_checks_change_no_value():
    """Replacement 26: with the interpreter's discarded overflow checks off, a
    kernel computes what it computes with them on, int32 wrap-around included."""
    proc = subprocess.run(
        [sys.executable, "-c", OVERFLOW_CHILD], env=subprocess_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
