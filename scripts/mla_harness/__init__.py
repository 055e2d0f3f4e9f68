"""Drive SGLang's real trtllm_mla backend code outside a server.

Modules, one job each:

- ``replacements``: the only things replaced, each with the reason (one place).
- ``standin``: a small ModelRunner stand-in and the backends built on it.
- ``batches``: forward batches and CUDA-graph-runner style padding.
- ``launches``: counts Triton launches, device ops, syncs and allocations.
- ``visible``: the metadata the attention kernel reads, and only that.
- ``scenarios``: seeded scenario generation.
- ``probe``: runs scenarios against one tree in its own process.
"""
