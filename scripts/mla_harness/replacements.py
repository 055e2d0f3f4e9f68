"""Everything the harness replaces, in one place, with the reason for each.

The backend under test (``TRTLLMMLABackend``, ``TRTLLMMLAMultiStepDraftBackend``)
and everything its metadata path calls run unmodified. Only what that path
never calls is replaced (1-6, and only where absent), plus the attention
kernel the metadata feeds, which is the output under test's consumer (7):

1. ``SGLANG_IS_FLASHINFER_AVAILABLE=false`` (when ``flashinfer`` is not
   installed): keeps FlashInfer out of the import chain. The trtllm metadata
   path builds its own block tables and never calls FlashInfer; the attention
   kernel that does is not run here.
2. FlashInfer's ``BatchMLAPagedAttentionWrapper`` and
   ``BatchPrefillWithRaggedKVCacheWrapper`` (when undefined): the FlashInfer
   parent's ``__init__`` constructs them; the trtllm path never uses them.
   ``InertWrapper`` raises if anything calls it, so a test would fail loudly.
3. ``sgl_kernel``, ``deep_gemm``, ``flash_mla`` (when not importable): CUDA-only
   packages imported at module load on CUDA hosts, never called by the
   metadata path. The stand-in module raises on any call for the same reason
   (all but the one function of 23).
4. On CPU only: factory calls with a hard-coded ``device="cuda"`` (the
   FlashInfer parent's ``init_cuda_graph_state`` and the multi-step draft
   backend's buffers) are redirected to the CPU, so the same code allocates
   the same shapes and dtypes there.
5. On CPU only: ``TRITON_INTERPRET=1``, so the real Triton kernels run in
   Triton's interpreter. It must be set before ``triton`` is imported.
6. The attention tensor-parallel group: a single-process stand-in exposing
   ``world_size`` (the backend reads only the attention TP size); this is the
   state ``initialize_model_parallel`` would leave behind.
7. Where a test runs the backend's forward (``attention.kernel_sink``): the
   attention kernel itself, through ``_run_decode_kernel``, the backend's own
   hook for swapping it (SGLang's Tokenspeed backend overrides it). The
   trtllm-gen kernel needs SM100; the metadata under test is what the forward
   hands that hook, which the replacement records (and, on GPU, feeds to a
   reference paged MLA decode). Everything before the call runs unmodified.
8. On CUDA without ``sgl_kernel``: the custom-op schemas SGLang registers
   fake (meta) kernels for at import (``sgl_kernel::moe_fused_gate`` in
   ``layers/moe/topk.py``, reached by importing ``cuda_graph_runner`` for its
   ``patch_model``) are defined, so those registrations succeed. The ops have
   no implementation: calling one fails (none is on the path under test).

v0.5.23 (``sglang_api.V0523``) needs 6 only as ``get_parallel().override``,
SGLang's own test-kit mechanism, and its import chain needs the real
``apache-tvm-ffi`` (``all_reduce.py`` subclasses ``tvm_ffi.Object``): no
stand-in. Its backends' constructors call four things more, replaced at
construction (``install_construction_stand_ins``, ``unpinned_host_on_cpu``):

9. Where SGLang did not import FlashInfer (``trtllm_mla_backend`` has no
   ``flashinfer``: it imports it only where ``is_flashinfer_available()``,
   FlashInfer importable and CUDA, so never on CPU, whatever is installed):
   ``trtllm_mla_backend.make_persistent_multi_ctas_kv_counter_buffer``, which
   sizes the trtllm-gen kernel's counter scratch through ``flashinfer.utils``.
   Only that kernel reads the buffer (``_run_decode_kernel``, replaced by 7);
   the stand-in is an ``Unusable`` object that fails on any use. On CUDA with
   FlashInfer the real buffer is made (``flashinfer.utils.get_device_sm_count``
   and ``get_trtllm_gen_multi_ctas_kv_counter_bytes``), and 1 and 2 are not
   installed either.
10. ``trtllm_mla_backend._jit_fixup_module``: ``__init__`` JIT-builds the
   prefill zero-KV fixup CUDA kernel ahead of time (needs nvcc and the tvm_ffi
   JIT toolchain, absent on CPU and in the offline bundle). Only that name in
   the backend module is replaced, returning an ``Unusable`` module; the real
   ``fixup_zero_kv_rows`` (prefill with a zero-KV chunk, not under test) is
   left as it is and would fail loudly on CPU.
11. On CPU only: ``can_use_set_mla_kv_concat_q`` / ``_fp8``, which read
   ``torch.cuda.get_device_capability()``: False. They choose the fused
   KV-write kernel, which runs only when the forward saves KV; the harness's
   forwards run with ``save_kv_cache=False``, and the unfused write would
   fail on the harness's KV pool (it has no ``set_mla_kv_buffer``).
12. On CPU only: ``pin_memory=True`` is dropped (the FlashInfer parent's
   fast-plan host buffers; pinning needs CUDA). The buffers keep their shapes
   and dtypes; the trtllm path never plans with them.

``runner_check`` builds v0.5.23's real ``DecodeCudaGraphRunner`` (target
verify, and plain decode), ``EAGLEDraftCudaGraphRunner`` and
``EAGLEDraftExtendCudaGraphRunner`` on the real backends; what they need
beyond the backends is replaced by (``target_runner_fields``,
``draft_worker``, ``single_process_graph_capture``, ``eager_graph_backend``):

13. The models. The draft runner's ``run_once`` calls the worker's
   ``draft_forward`` after the in-graph metadata step; the stand-in runs, per
   draft step but the last, one attention layer through the step backend's
   real ``forward_decode`` under its forward context (kernel: 7), then
   advances ``positions``, as ``draft_forward`` does around the draft model
   (``eagle_worker_v2.py:808-849``). The real one calls ``ModelRunner.
   forward`` per step, whose one metadata decision is to plan a batch not
   marked ready; the runner marks its capture batch ready
   (``eagle_draft_cuda_graph_runner.py:536``), so it plans nothing there
   either. The decode and draft-extend runners' ``run_once`` call the
   model's ``forward`` themselves: the stand-in is one attention layer
   through the backend's real ``forward_extend`` (``forward_decode`` for
   plain decode), returning its rows (the decode runner's as
   ``LogitsProcessorOutput``). Sampling, logits and the
   models' layers are not on the metadata path. The workers' and model
   runners' other fields are the values the runners read for EAGLE on a
   DeepSeek-V3 architecture (no DSA top-k seed, hot-token map, LoRA, PP
   proxies, n-gram embedding, hisparse, capture hooks or canary; a logits
   buffer of zeros; ``decode_num_tokens_per_req`` as ``ModelRunner``'s for
   EAGLE, ``model_runner.py:876-895``, which cannot be imported without the
   server's packages). Under ``--enable-torch-compile`` (``runner_check``'s
   ``compile`` variant) the stand-in is a ``torch.nn.Module`` whose
   ``forward`` is the same call, as ``patch_model`` walks ``_modules`` and
   compiles ``model.forward``.
14. The process groups of a one-process world: ``get_parallel().tp_group``
   (``FullCudaGraphBackend`` calls ``barrier()`` before each warm-up: a no-op
   alone) and the capture loop's ``graph_capture`` (for a world of one,
   ``GroupCoordinator.graph_capture`` waits for the current stream and enters
   the capture stream; it has no communicator to set up). Everything
   captured and replayed runs on that stream, as in a server.
15. The model runner's one-time kernel warm-up (``BaseRunner._warmup``, run
   once per process before the first capture: all-reduce workspaces and
   FlashInfer autotune of the model's kernels): marked done
   (``_kernel_warmed_up``); there is no model and no communicator here.
16. On CPU only (the same check in CI): CUDA graphs. ``FullCudaGraphBackend``'s
   ``capture_session``, ``capture_one`` and ``replay`` are replaced (and, in a
   tree with 0013, ``replayer``, the replay a runner keeps per size: that
   replacement's ``replay`` of the key): capture
   runs ``run_once`` twice as warm-ups (with the barrier and the post-warm-up
   hook, as the real one) and once more in place of the graph, and records
   it; a replay re-runs it, as the breakable backend's debug mode does (24
   runs that backend itself). So a replay is the recorded metadata step and forward over the
   runner's buffers, after what the host call before it did. What a real
   graph fixes at capture is checked, not emulated: every re-run must touch
   (read or write, by aten op or Triton launch) exactly the storages that
   existed before it that the capture run touched (``launches.trace``), the
   addresses a graph would replay with; Python state (which metadata object
   an attribute holds, scalars) is not checked, and is the GPU run's to
   show. The capture stream and the free-memory probe of the capture loop
   are the host's (none, 0), and the host never captures a stream
   (``torch.cpu.is_current_stream_capturing``: False, so the decode runner
   plants no in-graph shared-read marker and publishes a read-done event
   after the replay instead, its own fallback; ``runner_check`` checks the
   marker's place in the re-run's order instead). With
   ``--freeze-metadata``, each re-run first gives the backends back the
   ``forward_decode_metadata`` object they held when that graph was
   captured; attributes rebound later, scalars and host tensors are not
   restored. With ``runner_check --time --host-only`` (a measurement of the
   runners' host time, never a check) a replay re-runs nothing: it is the
   real ``replay`` less the graph launch (``graph_pool_replay_scope``, then
   the capture's outputs), so ``execute``'s time is the host's work around
   the launch, not the eager re-run's.

``dcp_check`` (v0.5.23) and the benchmark's ``--dcp-size``:

17. Decode context parallelism in one process: ``get_parallel().override``
   sets only the DCP group's size and rank (``dcp_size``, ``attn_dcp_size``,
   ``dcp_rank``, ``attn_dcp_rank``, ``dcp_enabled``; ``Setup.dcp_size`` /
   ``dcp_rank``), as a rank of a DCP world would read them. No communicator
   exists: the metadata path reads only these values, and the cross-rank
   merge after the kernel (``forward_mla``) is not run; where a DCP forward
   runs, it stops at the kernel call (7), so ``fixup_zero_kv_rows`` after it
   is not run either. The stand-in ``req_to_token`` gives token ``t`` a slot
   whose owner is ``t % dcp_size`` (SGLang's token-interleaved layout).

``scripts/kit_probe`` runs upstream's own attention test kit (v0.5.23 wheel,
``sglang/test/kits/attention_unittest``) on each tree; beyond 1-5, 9-12 and
the kernel (7, as a float32 paged MLA decode, ``kit_env.paged_decode``):

18. ``uvicorn`` and ``fastapi``: the kit imports ``ModelRunner``, whose import
   chain reaches the HTTP server's modules; stub modules whose every name is
   inert (``install_inert_modules``; 22 uses them too). Nothing on the
   attention path calls them.
19. On the base tree only, the kit's ``prepare_mla_runner_inputs``
   (``kit_fix``, where a test asks for the corrected kit): v0.5.23's writes
   the prefix KV at contiguous slots whatever layout the batch's
   ``req_to_token`` has (``mla_attention.py:1139-1155``), over other tokens'
   slots once a prefix passes one page (``patches/v0.5.23/README.md``).
   The correction writes each token where ``req_to_token`` says, as the
   series' kit patch does in the patched tree, whose kit runs unreplaced;
   ``test_kit23`` also runs the base tree's kit as shipped.

The series' upstream test files (patches/v0.5.23) run in a child with
``tests/v0_5_23/registered_env23.py`` as a pytest plugin: 1-5, 9-12, 22
(the kit patch's file imports ``ModelRunner`` through the kit), 23 on CUDA
(the triton backends of that file's cases), and

20. ``datasets`` (when not installed): an absent module, as in 3.
   ``sglang.test.test_utils`` (``CustomTestCase``) imports the serving
   benchmark, which imports it at module load; the file never calls it. The
   same for the kit patch's upstream file, whose case tables
   ``kit_probe/run_registered_cases.py`` imports.

With an FP8 KV cache (``runner_check --variant fp8``, ``ragged_verify_check
--kv-dtype float8_e4m3fn``), on CUDA only:

21. Where the tvm_ffi JIT cannot build it (as for 10: no nvcc / JIT toolchain
   in the offline bundle): ``concat_mla_absorb_q`` of ``kernels/ops/attention/
   utils.py``, the CUDA concat that ``concat_mla_absorb_q_general`` calls on
   CUDA for 512 / 64-wide halves, inside the FP8 forward's
   ``mla_quantize_without_rope_for_fp8`` (decode and verify) and draft
   extend's merge before its FP8 cast (``trtllm_mla_backend.py``, patched
   tree 1162, 1371, 1408; base tree 1262, 1471, 1508). The stand-in is
   ``torch.cat`` on the last dimension, what the same function runs off CUDA
   (its other branch). Unlike 1-20 this one IS on the path: the concat builds
   the query the backend then casts to FP8; what that yields is read where
   the kernel receives it (7: FP8, asserted) and compared with the query
   rounded by a plain cast. The real JIT kernel is tried first and kept when
   it builds; a line on stderr says when the stand-in is used.

``runner_check``'s "multi_layer" and "frozen_kv" variants build v0.5.23's
``MultiLayerEagleMultiStepDraftExtendCudaGraphRunner`` and
``FrozenKVMTPCudaGraphRunner`` (``multi_layer_draft_worker``,
``frozen_kv_worker``): 13-16 as for the EAGLE runners (13: one attention
layer per MTP layer's forward, through that layer's own backend, and a zero
logit row per request; the frozen draft loop's forwards, as
``FrozenKVMTPDraftWorker.draft_forward`` runs them under its target-pool
view), their workers the real classes made without ``__init__`` (which loads
the draft models), and

22. ``setproctitle``, ``uvicorn`` and ``fastapi`` (when not installed): the
   workers' modules import the scheduler's (``GenerationBatchResult``), which
   imports them at load (the process title, the HTTP server); inert modules
   as in 18 (their names are used at import, so they cannot raise). Nothing
   the runners run calls them.

Where a case constructs v0.5.23's Triton attention backend on CUDA (the kit's
upstream cases, ``kit_probe/run_registered_cases.py``, as reference):

23. On CUDA without ``sgl_kernel``: ``sgl_kernel.utils.is_arch_support_pdl``,
   which ``TritonAttnBackend.__init__`` calls (``triton_backend.py`` 71, 340)
   to choose programmatic dependent launch for its kernels. It IS on that
   path, so the stand-in module's function is the real one's
   (``ABSENT_FUNCTIONS``): the current CUDA device's compute capability
   major >= 9, cached (``sgl-kernel/python/sgl_kernel/utils.py``,
   sgl-project/sglang 4b5835f744ca; SGLang's own copy,
   ``sglang/kernels/jit/utils/arch.py`` 194-198, answers the same on CUDA).

``runner_check``'s "breakable_debug" variants (``--cuda-graph-backend-decode
breakable --debug-cuda-graph``) run v0.5.23's own ``BreakableCudaGraphBackend
(debug_eager=True)`` (16 is not installed); on CPU only (``breakable_debug_segments``):

24. Its CUDA graphs. In debug mode the whole forward is one eager break
   (``breakable_cuda_graph_backend.py:151-160``), so the ``torch.cuda.CUDAGraph``
   segments before and after it capture nothing: the stand-in segment asserts
   that (no aten op or Triton launch between its ``capture_begin`` and
   ``capture_end``) and replays nothing, as an empty graph does. The graph
   memory pool's handle (``torch.cpu`` has no ``graph_pool_handle``) is a
   token nothing allocates from; the capture loop is 16's host loop (no
   stream capture, no capture stream, no free-memory probe). The backend's
   capture, output buffer and replay of the break run unmodified.

On CUDA without ``sgl_kernel``, the same variants run real CUDA graphs and
reach one of its functions:

25. ``sgl_kernel.weak_ref_tensor``, which the breakable capture calls on the
   arguments and outputs it records (``breakable_cuda_graph.py:176``, through
   ``runner_backend_utils/weak_ref_tensor.py``). It IS on that path, so the
   stand-in module's function (``ABSENT_FUNCTIONS``) returns what sgl-kernel's
   does, a tensor over the same memory (data pointer with its offset, sizes,
   strides, dtype, device: ``torch::from_blob`` in sgl-kernel's
   ``weak_ref_tensor``), as ``tensor.detach()``, which also holds the storage
   where sgl-kernel's does not: only when that memory may be freed differs,
   and the graph's pool keeps the captured tensors' memory either way.

On CPU only, in Triton's interpreter (5):

26. The interpreter's integer overflow checks. It runs every int32 add, sub
   and mul of a kernel a second time in int64 and compares the result with
   int32's bounds (``semantic.binary_op_sanitize_overflow_impl``, as
   ``InterpreterOptions.sanitize_overflow`` defaults to true), then hands the
   result to ``device_assert``, which drops it unless ``options.debug`` is set
   (``semantic.device_assert``), and the interpreter's ``debug`` is false: the
   checks compute values nothing reads, about 60% of a ragged verify run's
   time on CPU (cProfile, 2026-12-04). ``sanitize_overflow`` is set false on
   the interpreter's builder where ``debug`` is false, as a compiled kernel
   without debug checks nothing either; every value a kernel computes or
   stores is unchanged.

``kit_probe/run_kept_replay_cases.py`` runs 0013's CUDA-only upstream class
``TestKeptReplayBuiltByInit`` (the kit's EAGLE draft and draft-extend runner
cases, each runner built by its ``__init__``) on CPU: the kit's stand-ins
(``kit_env``), 16 for the graphs, and (``kit_runner_cases_on_cpu``):

27. The kit's CUDA host calls beside its tensors: ``_seeded_rng`` saves and
   restores the CUDA generator's state (``torch.cuda.get_rng_state`` /
   ``set_rng_state``), and its capture shim ``_single_rank_graph_capture``
   makes a ``torch.cuda.Stream()`` where the capture loop passes none (16's
   loop passes none). Without a GPU there is no CUDA generator to keep and
   no stream to capture on: both are no-ops (the CPU generator is seeded and
   restored as before).
28. A re-run's forward context (16 with ``capture_context``). A graph
   replays its kernels without Python; 16's re-run runs the model's Python
   again, and the kit's model reads the forward context
   (``get_token_to_kv_pool``), which the runners set only around capture
   (``eagle_draft_cuda_graph_runner.py:584``,
   ``eagle_draft_extend_cuda_graph_runner.py:545``). A re-run with no
   context active runs under the one its capture ran under; the runners'
   replay paths are unchanged.

The translating pool (``unified_pool``, ``Setup.unified_pool``) replaces
nothing: SGLang's own ``init_unified_mamba_pools`` builds the pools,
allocator and ``req_to_token`` pool on the harness's device, and the model
runner's ``KVIndexTranslator`` is built over them as ``ModelRunner`` builds it
(``sglang_api.runner_fields``). Only the parallel state is set, as in 17: a
world without DCP's size 1 and rank 0 (the allocator reads the DCP rank). The
kernel (7) reads the harness's KV buffer, indexed by the physical pages the
translator hands it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from types import SimpleNamespace

CUDA_ONLY_MODULES = ("sgl_kernel", "deep_gemm", "flash_mla")


@functools.lru_cache(maxsize=1)
def _is_arch_support_pdl() -> bool:
    """Replacement 23: ``sgl_kernel.utils.is_arch_support_pdl`` as sgl-kernel
    defines it: Hopper (compute capability 9.0) or later."""
    import torch

    major, _ = torch.cuda.get_device_capability(torch.cuda.current_device())
    return major >= 9


def _weak_ref_tensor(tensor):
    """Replacement 25: ``sgl_kernel.weak_ref_tensor``'s tensor over the same
    memory, owning it (see the module docstring)."""
    return tensor.detach()


# Replacements 23 and 25: the functions of absent CUDA-only modules that a
# path the harness runs calls, each as the real module defines it (module ->
# name -> function); every other name of those modules refuses calls.
ABSENT_FUNCTIONS = {
    "sgl_kernel": {"weak_ref_tensor": _weak_ref_tensor},
    "sgl_kernel.utils": {"is_arch_support_pdl": _is_arch_support_pdl},
}
# Replacement 22: the server's packages the speculative workers' modules
# import through the scheduler's module.
SERVER_MODULES = ("setproctitle", "uvicorn", "fastapi")
WRAPPER_NAMES = ("BatchMLAPagedAttentionWrapper", "BatchPrefillWithRaggedKVCacheWrapper")


def cuda_visible() -> bool:
    """True when a CUDA device can be used (checked without importing triton)."""
    import torch

    return torch.cuda.is_available()


def prepare_environment(use_cuda: bool) -> None:
    """Replacements 1, 3, 5 and 26: must run before sglang (and triton) import."""
    if importlib.util.find_spec("flashinfer") is None:
        os.environ["SGLANG_IS_FLASHINFER_AVAILABLE"] = "false"
    if not use_cuda:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("TRITON_INTERPRET=1 must be set before triton loads")
        os.environ["TRITON_INTERPRET"] = "1"
        skip_discarded_overflow_checks()
    absent = [
        n for n in CUDA_ONLY_MODULES if n not in sys.modules and importlib.util.find_spec(n) is None
    ]
    if absent:
        sys.meta_path.insert(0, _AbsentFinder(absent))
    if use_cuda and "sgl_kernel" in absent:
        _define_fake_registered_ops()


def skip_discarded_overflow_checks() -> None:
    """Replacement 26: the interpreter's overflow checks off where its
    ``device_assert`` would drop their result (``debug`` false)."""
    import dataclasses

    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or options.debug or not getattr(options, "sanitize_overflow", False):
        return
    builder.options = dataclasses.replace(options, sanitize_overflow=False)


# Replacement 8: (op, schema) of every sgl_kernel op SGLang registers a fake
# kernel for when it imports the modules the harness uses.
FAKE_REGISTERED_OPS = (
    (
        "moe_fused_gate",
        "(Tensor input_tensor, Tensor bias, int num_expert_group, int topk_group, int topk,"
        " int num_fused_shared_experts=0, float routed_scaling_factor=0,"
        " bool apply_routed_scaling_factor_on_output=False) -> Tensor[]",
    ),
)
_op_libraries: list = []  # a torch.library.Library drops its ops when collected


def _define_fake_registered_ops() -> None:
    """Replacement 8: schemas only; no kernel is registered for any backend."""
    import torch

    library = torch.library.Library("sgl_kernel", "FRAGMENT")
    for name, schema in FAKE_REGISTERED_OPS:
        library.define(name + schema)
    _op_libraries.append(library)


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves absent CUDA-only packages and any submodule of them
    (``from deep_gemm.utils.layout import x``) as ``_absent_module``s."""

    def __init__(self, roots: list[str]):
        self.roots = tuple(roots)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _absent_module(spec.name)

    def exec_module(self, module):
        pass


def _absent_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"<absent {name}>"
    module.__path__ = []  # a package: submodules come from _AbsentFinder
    for attr, function in ABSENT_FUNCTIONS.get(name, {}).items():
        setattr(module, attr, function)

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _NeverCalled(f"{name}.{attr}")

    module.__getattr__ = __getattr__
    return module


class _NeverCalled:
    """Stands for an attribute of an absent module; calling it is a test failure."""

    def __init__(self, qualname: str):
        self._qualname = qualname

    def __call__(self, *args, **kwargs):
        raise AssertionError(f"{self._qualname} was called: the path under test uses it")

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _NeverCalled(f"{self._qualname}.{attr}")


class _Inert:
    """Replacements 18 and 22: what an inert module's every name is (a class
    of this, so that subclassing and decorating work); instances and calls
    give more of the same."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Inert()


class _InertFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the modules ``roots`` (and their submodules) as inert modules."""

    def __init__(self, roots):
        self.roots = tuple(roots)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__file__ = f"<inert {spec.name}>"

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return type(attr, (_Inert,), {})

        module.__getattr__ = __getattr__
        return module

    def exec_module(self, module):
        pass


def install_inert_modules(roots, only_absent: bool = True) -> None:
    """Replacements 18 and 22: ``roots`` become inert modules (``only_absent``:
    those not installed)."""
    if only_absent:
        roots = [r for r in roots if r not in sys.modules and importlib.util.find_spec(r) is None]
    if roots:
        sys.meta_path.insert(0, _InertFinder(roots))


class InertWrapper:
    """Replacement 2: constructed by the FlashInfer parent, never used by trtllm."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, attr: str):
        raise AssertionError(f"FlashInfer wrapper .{attr} used by the trtllm path")


def install_flashinfer_wrappers() -> None:
    """Replacement 2, into the FlashInfer MLA module where FlashInfer is absent."""
    from sglang.srt.layers.attention import flashinfer_mla_backend as parent

    for name in WRAPPER_NAMES:
        if not hasattr(parent, name):
            setattr(parent, name, InertWrapper)


def install_attention_tp(world_size: int) -> None:
    """Replacement 6: the attention TP group of a single process."""
    from sglang.srt.distributed import parallel_state

    parallel_state._ATTN_TP = SimpleNamespace(world_size=world_size, rank_in_group=0, rank=0)


class Unusable:
    """Replacements 9 and 10: a value the constructor stores and the path
    under test never uses; any use of it fails the test."""

    def __init__(self, what: str):
        self._what = what

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AssertionError(f"{self._what} used: the path under test needs the real one")

    def __call__(self, *args, **kwargs):
        raise AssertionError(f"{self._what} called: the path under test needs the real one")


def _never_capable(*args, **kwargs) -> bool:
    return False


def flashinfer_in_use(module) -> bool:
    """Whether SGLang imported FlashInfer into ``module`` (v0.5.23's
    ``trtllm_mla_backend``): it does where ``is_flashinfer_available()``."""
    return isinstance(getattr(module, "flashinfer", None), types.ModuleType)


def construction_stand_ins(use_cuda: bool, flashinfer: bool) -> dict:
    """Replacements 9-11: name in ``trtllm_mla_backend`` -> stand-in, for this
    host; ``flashinfer``: whether the module uses the real one (9 is then not
    replaced)."""
    out = {
        "_jit_fixup_module": lambda dtype: Unusable("the zero-KV fixup JIT module"),
    }
    if not flashinfer:
        out["make_persistent_multi_ctas_kv_counter_buffer"] = (
            lambda device, num_q_heads, max_batch_size: Unusable(
                "the trtllm-gen multi-CTA KV counter buffer"
            )
        )
    if not use_cuda:
        out["can_use_set_mla_kv_concat_q"] = _never_capable
        out["can_use_set_mla_kv_concat_q_fp8"] = _never_capable
    return out


def install_construction_stand_ins(module, use_cuda: bool) -> None:
    """Replacements 9-11, into v0.5.23's ``trtllm_mla_backend`` module; a name
    the module lacks means the replacement is out of date: fail."""
    for name, stand_in in construction_stand_ins(use_cuda, flashinfer_in_use(module)).items():
        if not hasattr(module, name):
            raise AssertionError(f"{module.__name__} has no {name}: update replacements.py")
        setattr(module, name, stand_in)


@contextlib.contextmanager
def unpinned_host_on_cpu(use_cuda: bool):
    """Replacement 12: drop ``pin_memory=True`` on CPU."""
    if use_cuda:
        yield
        return
    from torch.overrides import TorchFunctionMode

    class _Unpinned(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if kwargs.get("pin_memory"):
                kwargs = {**kwargs, "pin_memory": False}
            return func(*args, **kwargs)

    with _Unpinned():
        yield


@contextlib.contextmanager
def cuda_factories_on_cpu(use_cuda: bool):
    """Replacement 4: redirect hard-coded ``device="cuda"`` factories on CPU."""
    if use_cuda:
        yield
        return
    import torch
    from torch.overrides import TorchFunctionMode

    class _CudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            device = kwargs.get("device")
            if device is not None and torch.device(device).type == "cuda":
                kwargs = {**kwargs, "device": "cpu"}
            return func(*args, **kwargs)

    with _CudaToCpu():
        yield


class _OneProcessGroup:
    """Replacement 14: the TP group of a world of one."""

    world_size = 1
    rank_in_group = 0
    ca_comm = None

    def barrier(self) -> None:
        pass


@contextlib.contextmanager
def single_process_graph_capture():
    """Replacement 14: ``graph_capture`` and ``get_parallel().tp_group`` of a
    one-process world, in the decode runner module (the draft runner's capture
    loop)."""
    import torch
    from sglang.srt.model_executor.runner import decode_cuda_graph_runner as module
    from sglang.srt.runtime_context import get_parallel

    @contextlib.contextmanager
    def graph_capture(stream=None):
        if not torch.cuda.is_available():  # 16: no streams on the host
            yield SimpleNamespace(stream=stream)
            return
        stream = stream if stream is not None else torch.cuda.Stream()
        current = torch.cuda.current_stream()
        if current != stream:
            stream.wait_stream(current)
        with torch.cuda.stream(stream):
            yield SimpleNamespace(stream=stream)

    if not hasattr(module, "graph_capture"):
        raise AssertionError(f"{module.__name__} has no graph_capture: update replacements.py")
    real = module.graph_capture
    module.graph_capture = graph_capture
    try:
        with get_parallel().override(tp_rank=0, tp_group=_OneProcessGroup()):
            yield
    finally:
        module.graph_capture = real


def target_runner_fields(backends, model_forward, eagle: bool = True, module: bool = False) -> None:
    """Replacements 13 and 15 for the target worker's model runner, which the
    decode runner is built on (``ModelRunner``'s fields the runner reads
    beyond the backends'). ``module``: the model is a ``torch.nn.Module``
    (what ``torch_compile_decoration.patch_model`` walks and compiles)."""
    import torch
    from sglang.srt.runtime_context import get_server_args
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_utils import resolve_num_tokens_per_req

    runner = backends.runner
    runner.server_args = get_server_args()
    hf_config = SimpleNamespace(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3")
    runner.model_config = SimpleNamespace(
        **vars(runner.model_config),
        vocab_size=1024,
        hidden_size=64,
        dtype=torch.bfloat16,
        model_is_mrope=False,
        is_encoder_decoder=False,
        hf_config=hf_config,
        hf_text_config=hf_config,
    )
    runner.spec_algorithm = SpeculativeAlgorithm.EAGLE if eagle else SpeculativeAlgorithm.NONE
    runner.attn_backend = backends.target

    # ModelRunner.decode_num_tokens_per_req (model_runner.py:876-897, no DSpark,
    # no dLLM; importing model_runner needs the server's packages).
    def decode_num_tokens_per_req(num_draft_tokens=None):
        if not runner.spec_algorithm.is_speculative():
            return 1
        return resolve_num_tokens_per_req(
            phase="target_verify",
            spec_algorithm=runner.spec_algorithm,
            is_draft_worker=runner.is_draft_worker,
            num_draft_tokens=num_draft_tokens,
        )

    runner.decode_num_tokens_per_req = decode_num_tokens_per_req
    _runner_fields(runner, model_forward, module)
    runner.lora_manager = None
    runner.hisparse_coordinator = None
    runner.capture_head_hooks = []
    runner.capture_tail_hooks = []
    runner.ngram_embedding_manager = SimpleNamespace(enabled=False)
    runner.attn_tp_sequence_sharded = lambda num_tokens: False
    runner.get_pp_proxy_topk_size = lambda: None
    runner.get_pp_proxy_residual_num_blocks = lambda: None
    runner.get_pp_proxy_dspark_hidden_size = lambda: None
    runner.get_aux_hidden_states_width = lambda: None


def _runner_fields(runner, model_forward, module: bool = False) -> None:
    """The model-runner fields every runner here reads the same way: no
    device timer or canary, GPU 0, a logits buffer of zeros, the stand-in
    model (13; ``module``: as a ``torch.nn.Module``), the kernel warm-up
    done (15)."""
    import torch
    from sglang.srt.configs.shared_experts import SharedExpertsConfig

    runner.device_timer = None
    runner.gpu_id = 0
    runner.canary_manager = None
    runner.shared_read_done_event = None
    runner.graph_shared_output = SimpleNamespace(
        get_logits_buffer=lambda vocab_size, rows: torch.zeros(
            rows, vocab_size, dtype=torch.float32, device=runner.device
        )
    )
    if module:

        class Model(torch.nn.Module):
            def forward(self, *args, **kwargs):
                return model_forward(*args, **kwargs)

        runner.model = Model()
    else:
        runner.model = SimpleNamespace(forward=model_forward)
    runner.model.shared_experts_config = SharedExpertsConfig()
    runner._kernel_warmed_up = True  # 15


def draft_worker(backends, setup, draft_forward, model_forward):
    """Replacements 13 and 15: the EAGLE draft worker the runners are built on
    (``EagleDraftWorker``: ``draft_runner``, no ``model_runner``) and the
    model-runner fields they read beyond the backends'. ``draft_forward``:
    the worker's multi-step draft; ``model_forward``: the draft model's
    forward the draft-extend runner calls."""
    import torch
    from sglang.srt.runtime_context import get_server_args
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    runner = backends.draft_runner
    runner.server_args = get_server_args()  # the published one (``V0523.configure``)
    runner.model_config = SimpleNamespace(
        **vars(runner.model_config),
        vocab_size=1024,
        spec_hidden_size=64,
        dtype=torch.bfloat16,
        model_is_mrope=False,
        hf_config=SimpleNamespace(),
    )
    runner.spec_algorithm = SpeculativeAlgorithm.EAGLE
    runner.draft_attn_backend = backends.draft
    _runner_fields(runner, model_forward)
    return SimpleNamespace(
        draft_runner=runner,
        draft_forward=draft_forward,
        draft_extend_attn_backend=backends.draft_extend,
        speculative_algorithm=runner.spec_algorithm,
        speculative_num_steps=setup.steps,
        hot_token_id=None,
        dsa_seed_topk_width=0,
        seed_dsa_topk_from_draft_extend=False,
    )


def multi_layer_draft_worker(worker, step_backends, step_forwards):
    """Replacements 13 and 15 for multi-layer EAGLE: the real
    ``MultiLayerEagleDraftWorker``, not constructed (its ``__init__`` loads a
    draft model per MTP layer), holding what its draft-extend runners read: a
    model runner per MTP layer (the draft worker's runner's fields, each with
    its layer's stand-in model, ``step_forwards``, and its backend), those
    backends, no widened front window (the boundary-KV fix is off by default,
    ``SGLANG_ENABLE_MTP_BOUNDARY_KV_FIX``), no chained MTP hidden states
    (DeepSeek's MTP is not one of the chained architectures,
    ``multi_layer_eagle_worker_v2.py:196-200``) and no rejection sampling.
    ``worker``: ``draft_worker``'s."""
    install_inert_modules(SERVER_MODULES)  # 22
    from sglang.srt.speculative.multi_layer_eagle_worker_v2 import MultiLayerEagleDraftWorker

    base = worker.draft_runner
    runners = []
    for backend, forward in zip(step_backends, step_forwards, strict=True):
        runner = SimpleNamespace(**vars(base))
        _runner_fields(runner, forward)
        runner.attn_backend = backend
        runners.append(runner)
    out = MultiLayerEagleDraftWorker.__new__(MultiLayerEagleDraftWorker)
    fields = dict(
        draft_runner_list=runners,
        draft_extend_attn_backend_list=list(step_backends),
        draft_extend_num_front_tokens=0,
        chain_mtp_hidden_states=False,
        use_rejection_sampling=False,
        speculative_num_steps=len(runners),
        topk=1,
        device=base.device,
        gpu_id=0,
    )
    for name, value in fields.items():
        setattr(out, name, value)
    return out


def frozen_kv_worker(worker, backend, draft_forward, target_pool):
    """Replacements 13 and 15 for Frozen-KV MTP: the real
    ``FrozenKVMTPDraftWorker``, not constructed (its ``__init__`` loads the
    assistant draft model), holding what its runner reads: the draft model
    runner (the draft worker's runner's fields; its backend ``backend``, its
    model's recurrent hidden size), the frozen-KV context of the target's KV
    pool (``target_pool``, the harness's, 7), and the draft loop stand-in
    ``draft_forward`` (13). Its metadata methods (``_frozen_kv_target_view``,
    ``_init_frozen_kv_metadata*``) are its own. ``worker``: ``draft_worker``'s."""
    install_inert_modules(SERVER_MODULES)  # 22
    from sglang.srt.speculative.frozen_kv_mtp_worker_v2 import FrozenKVMTPDraftWorker
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    runner = SimpleNamespace(**vars(worker.draft_runner))
    _runner_fields(runner, None)
    runner.model.backbone_hidden_size = runner.model_config.spec_hidden_size
    runner.attn_backend = backend
    runner.spec_algorithm = SpeculativeAlgorithm.FROZEN_KV_MTP
    out = FrozenKVMTPDraftWorker.__new__(FrozenKVMTPDraftWorker)
    fields = dict(
        _model_runner=runner,  # TpModelWorker.model_runner, draft_model_runner
        draft_attn_backend=backend,
        kv_context=SimpleNamespace(target_token_to_kv_pool=target_pool),
        draft_forward=draft_forward,
        topk=1,
    )
    for name, value in fields.items():
        setattr(out, name, value)
    return out


_ABSENT = object()


@contextlib.contextmanager
def eager_graph_backend(
    freeze: tuple = (), rerun_graphs: bool = True, capture_context: bool = False
):
    """Replacement 16 (CPU only): ``FullCudaGraphBackend`` records ``run_once``
    and a replay re-runs it; the capture loop's stream and memory probe are the
    host's. ``freeze``: attention backends whose ``forward_decode_metadata``
    each re-run first gets back as it was when that graph was captured.
    ``rerun_graphs`` False (a host-time measurement, never a check): a replay is the
    real one less the graph launch, returning the capture's outputs.
    ``capture_context`` (28): a re-run with no forward context active runs
    under the capture's."""
    from sglang.srt.model_executor import forward_context
    from sglang.srt.model_executor.runner import decode_cuda_graph_runner as loop
    from sglang.srt.model_executor.runner_backend import full_cuda_graph_backend
    from sglang.srt.model_executor.runner_backend.full_cuda_graph_backend import (
        FullCudaGraphBackend as backend,
    )

    from . import launches

    @contextlib.contextmanager
    def capture_session(self, stream):
        yield

    def capture_one(self, shape_key, forward_fn, capture_inputs=None, post_warmup_hook=None):
        if capture_context:
            forward_fn = _in_context(forward_fn, forward_context.get_forward_context())
        for _ in range(2):  # the real backend's two warm-ups
            self._tp_group.barrier()
            forward_fn()
            if post_warmup_hook is not None:
                post_warmup_hook()
        with launches.trace() as captured:  # the capture run
            self._outputs[shape_key] = forward_fn()
        held = [(b, b.forward_decode_metadata) for b in freeze]
        self._graphs[shape_key] = (forward_fn, held, captured)
        self.eager_events = captured.events

    def replay(self, shape_key, static_forward_batch, **kwargs):
        if not rerun_graphs:
            with full_cuda_graph_backend.graph_pool_replay_scope():
                pass
            return self._outputs[shape_key]
        forward_fn, held, captured = self._graphs[shape_key]
        for b, metadata in held:
            b.forward_decode_metadata = metadata
        with launches.trace() as rerun:
            out = forward_fn()
        if rerun.external != captured.external:
            new, gone = rerun.external - captured.external, captured.external - rerun.external
            raise AssertionError(
                f"a re-run of graph {shape_key} touched {len(new)} storage(s) its capture"
                f" did not, and not {len(gone)} it did: a CUDA graph would use the capture's"
            )
        self.eager_events = rerun.events
        self.eager_checked = getattr(self, "eager_checked", 0) + 1
        return out

    def replayer(self, shape_key):  # the real one less the graph: replay's re-run
        return lambda: replay(self, shape_key, None)

    patches = [
        (backend, "capture_session", capture_session),
        (backend, "capture_one", capture_one),
        (backend, "replay", replay),
    ]
    if "replayer" in vars(backend):  # the replay a runner keeps per key
        patches.append((backend, "replayer", replayer))
    with _patched([*_host_capture_loop(loop), *patches]):
        yield


def _in_context(forward_fn, context):
    """Replacement 28: ``forward_fn`` run under ``context`` where no forward
    context is active."""
    from sglang.srt.model_executor import forward_context

    def run():
        if forward_context.has_forward_context():
            return forward_fn()
        forward_context.set_forward_context(context)
        try:
            return forward_fn()
        finally:
            forward_context.set_forward_context(None)

    return run


@contextlib.contextmanager
def kit_runner_cases_on_cpu():
    """Replacement 27 (CPU only): the kit's CUDA generator state and its
    capture shim's stream, no-ops."""
    import torch

    patches = [
        (torch.cuda, "get_rng_state", lambda device="cuda": None),
        (torch.cuda, "set_rng_state", lambda new_state, device="cuda": None),
        (torch.cuda, "Stream", lambda *args, **kwargs: None),
    ]
    with _patched(patches):
        yield


def _host_capture_loop(loop) -> list:
    """Replacement 16's host capture loop (``loop``: the decode runner's
    module): no stream capture, no capture stream, no free-memory probe."""
    import torch

    return [
        # The host never captures a stream: the in-graph marker is not planted.
        (torch.cpu, "is_current_stream_capturing", lambda: False),
        (loop, "get_or_create_global_graph_capture_stream", lambda: None),
        (loop, "get_available_gpu_memory", lambda *args, **kwargs: 0.0),
    ]


@contextlib.contextmanager
def _patched(patches: list):
    """Set each (owner, name, value) while the block runs; ``torch.cpu``'s
    names may be absent, any other owner's must exist."""
    import torch

    saved = []
    try:
        for owner, name, value in patches:
            if name not in vars(owner) and owner is not torch.cpu:
                raise AssertionError(f"{owner.__name__} has no {name}: update replacements.py")
            saved.append((owner, name, vars(owner).get(name, _ABSENT)))
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


@contextlib.contextmanager
def breakable_debug_segments():
    """Replacement 24 (CPU only): the CUDA graphs of ``BreakableCudaGraphBackend``
    under ``--debug-cuda-graph``, whose whole forward is one eager break: each
    ``torch.cuda.CUDAGraph`` segment before and after it is a stand-in that
    must capture nothing (no aten op or Triton launch between its
    ``capture_begin`` and ``capture_end``) and replays nothing; the graph
    memory pool's handle (``torch.cpu`` has none) is a token nothing
    allocates from; the capture loop is the host's (16)."""
    import torch
    from sglang.srt.model_executor.runner import decode_cuda_graph_runner as loop

    from . import launches

    class EmptySegment:
        """A segment of the breakable graph: must stay empty."""

        def __init__(self, keep_graph: bool = False):
            self._stack = contextlib.ExitStack()

        def capture_begin(self, pool=None, capture_error_mode="global"):
            self._trace = self._stack.enter_context(launches.trace())

        def capture_end(self):
            self._stack.close()
            t = self._trace
            if t.external or t.created or t.events:
                raise AssertionError(
                    f"a debug breakable graph's segment captured work ({t.events},"
                    f" {len(t.external | t.created)} storages): only the eager break may run"
                )

        def replay(self):
            pass

    patches = [
        (torch.cuda, "CUDAGraph", EmptySegment),
        (torch.cpu, "graph_pool_handle", lambda: ("cpu", 0)),
    ]
    with _patched([*_host_capture_loop(loop), *patches]):
        yield


@contextlib.contextmanager
def absorb_q_concat(use_cuda: bool):
    """Replacement 21 (CUDA only, where the JIT module does not build): the
    absorbed-query concat of ``concat_mla_absorb_q_general`` as ``torch.cat``.
    Yields which concat runs: "jit", "torch.cat", or None off CUDA."""
    if not use_cuda:
        yield None
        return
    import torch
    from sglang.kernels.ops.attention import concat_mla, utils

    if not hasattr(utils, "concat_mla_absorb_q"):
        raise AssertionError(f"{utils.__name__} has no concat_mla_absorb_q: update replacements.py")
    try:
        concat_mla._jit_concat_mla_absorb_q_module()
    except Exception as error:  # the toolchain is absent: the stand-in
        print(
            f"replacement 21: concat_mla_absorb_q's JIT module does not build"
            f" ({type(error).__name__}): torch.cat stands in",
            file=sys.stderr,
        )
    else:
        yield "jit"
        return

    def concat(a, b):
        return torch.cat([a, b], dim=-1)

    real = utils.concat_mla_absorb_q
    utils.concat_mla_absorb_q = concat
    try:
        yield "torch.cat"
    finally:
        utils.concat_mla_absorb_q = real
