"""``launches.count_launches`` on foreach ops: the kernels a GPU would launch.

An in-place foreach op returns nothing, yet launches: one kernel where
PyTorch's fast route takes its lists (``ForeachUtils.h``: every tensor dense
and on one device, one dtype per list, each index's tensors of one shape and
strides, size-1 dimensions aside; ``_foreach_copy_`` may convert between
the lists' dtypes), else one per index whose tensors are not all empty. The
runners' grouped input copy (``RowsCopy``) is one such op per group.
"""

from __future__ import annotations

import pytest
import torch

from mla_harness import launches

# The counter takes CPU tensors for device ones only where CUDA is absent.
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only model")

I64, I32 = torch.int64, torch.int32


def _z(*shape, dtype=I64):
    return torch.zeros(shape, dtype=dtype)


def _host(t):
    launches.mark_host(t)
    return t


CASES = {
    "one dtype, dense": (lambda: ([_z(4), _z(3)], [_z(4), _z(3)]), 1),
    "the lists' dtypes differ (copy converts)": (
        lambda: ([_z(4), _z(3)], [_z(4, dtype=I32), _z(3, dtype=I32)]),
        1,
    ),
    "one list of two dtypes": (lambda: ([_z(4), _z(3, dtype=I32)], [_z(4), _z(3)]), 2),
    "a view by columns": (lambda: ([_z(3, 8)[:, :4], _z(5)], [_z(3, 4), _z(5)]), 2),
    "a permuted, dense pair": (lambda: ([_z(4, 3).t()], [_z(4, 3).t()]), 1),
    "strides of size-1 dimensions differ": (
        lambda: ([_z(6, 1)], [_z(6, 2)[:, :1].contiguous().as_strided((6, 1), (1, 5))]),
        1,
    ),
    "a strided source": (lambda: ([_z(4), _z(3)], [_z(8)[::2], _z(3)]), 2),
    "every tensor empty": (lambda: ([_z(0), _z(0)], [_z(0), _z(0)]), 0),
    "an empty pair beside a view by columns": (
        lambda: ([_z(0), _z(3, 8)[:, :4]], [_z(0), _z(3, 4)]),
        1,
    ),
    "a host source": (lambda: ([_z(4), _z(3)], [_host(_z(4)), _z(3)]), 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_foreach_copy(case):
    make, want = CASES[case]
    dsts, srcs = make()
    with launches.count_launches() as counts:
        torch._foreach_copy_(dsts, srcs)
    assert counts.torch.get("_foreach_copy_", 0) == want


def test_other_foreach_ops_need_one_dtype_across_lists():
    with launches.count_launches() as counts:
        torch._foreach_add_([_z(4), _z(3)], [_z(4), _z(3)])
        torch._foreach_add_([_z(4), _z(3)], [_z(4, dtype=I32), _z(3, dtype=I32)])
    assert counts.torch["_foreach_add_"] == 1 + 2
