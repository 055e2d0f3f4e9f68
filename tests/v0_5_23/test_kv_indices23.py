"""patches/v0.5.23 0003: the extended ``create_flashmla_kv_indices_triton``.

``mla_harness.kv_indices_check`` loads the kernel from the patched tree and
from v0.5.23 and runs both on the same random cases with garbage-prefilled
tables: called as every existing caller calls it, the patched kernel must
write exactly v0.5.23's table (entries it must not touch included); with the
new ``kv_lens_out_ptr`` / ``KV_LENS_OFFSET`` it must write v0.5.23's table for
``lengths + offset`` and store those lengths, computed in torch.
"""

from __future__ import annotations

import json

import pytest

from mla_harness import child

pytestmark = pytest.mark.base("v0.5.23")


def test_extended_kernel_keeps_defaults_and_fuses_lengths(trees23, device):
    cases = 300 if device == "cuda" else 40
    out = child.run(
        "mla_harness.kv_indices_check",
        trees23["patched"],
        device,
        "--reference",
        str(trees23["base"]),
        "--cases",
        str(cases),
    )
    report = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(report))
    assert report["cases"] == cases
    assert report["default_mismatches"] == 0
    assert report["fused_mismatches"] == 0
    assert report["lens_mismatches"] == 0
