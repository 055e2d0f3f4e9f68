"""The per-call Python of the two routes, on CPU tensors (no copy, no launch):
SmallCopy's layout key and source addresses against the candidate's per-source
checks and byte views. An estimate of their Python only: SmallCopy's dict,
bisect and launcher, and the foreach's C++ host side, need CUDA.

python3 pyparts.py  (any torch); the draft's six fields at bs 32: median µs of
20000 calls each, three rounds.
"""

import statistics
import time

import torch

srcs = [
    torch.arange(32),
    torch.arange(96),
    torch.arange(32),
    torch.rand(32, 1),
    torch.arange(32).view(32, 1),
    torch.arange(32),
]
views = [s.clone() for s in srcs]


def smallcopy_key():
    return tuple(
        [
            (s.dtype, s.shape, s.stride(), s.get_device(), s.requires_grad, s.is_neg())
            for s in srcs
        ]
    )


def smallcopy_addresses():
    return [s.data_ptr() for s in srcs]


def candidate_checks():
    for src, view in zip(srcs, views):
        if (
            src.dtype != view.dtype
            or src.shape != view.shape
            or src.get_device() != -1
            or src.requires_grad
            or not src.is_contiguous()
            or src.is_neg()
        ):
            return False
    return True


def candidate_byte_views():
    return [src.view(torch.uint8) for src in srcs]


for round_ in range(3):
    row = []
    for fn in (smallcopy_key, smallcopy_addresses, candidate_checks, candidate_byte_views):
        times = []
        for _ in range(20000):
            t = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - t)
        row.append(f"{fn.__name__} {statistics.median(times) / 1e3:.2f}")
    print(f"round {round_ + 1}: " + ", ".join(row))
