"""The parts table of README.md from lines*.txt: python3 summary.py, in this
folder (05j's summary.py with the statements of the series as main carries
it). Single calls only (the GPU synchronized before each runner's call); each
figure is a median over the process's 300 calls at that size, a sum of
medians where it adds statements or methods."""

import glob
import json

ITERATION = (
    "EAGLEDraftCudaGraphRunner.execute",
    "DecodeCudaGraphRunner.load_batch",
    "DecodeCudaGraphRunner.execute",
    "EAGLEDraftExtendCudaGraphRunner.execute",
)
DRAFT = "EAGLEDraftCudaGraphRunner._replay_kept_draft"
EXTEND = "EAGLEDraftExtendCudaGraphRunner._replay_kept_extend"
# (method, the start of a top-level statement's first line) per part
PARTS = {
    "grouped input copies (verify's with its host-side seq_lens_cpu)": (
        (DRAFT, "replay.copy("),
        ("CudaGraphBufferRegistry.fill_from", "for copy, index in ("),
        (EXTEND, "replay.copy("),
    ),
    "host-side lengths (draft, draft extend)": (
        (DRAFT, "if forward_batch.seq_lens_cpu"),
        (EXTEND, "if forward_batch.seq_lens_cpu"),
        (EXTEND, "if forward_batch.extend_seq_lens_cpu"),
    ),
    "metadata calls": (
        (DRAFT, "self.draft_attn_backend.init_forward"),
        ("DecodeCudaGraphRunner._load_kept", "self._init_replay_attn_metadata_from_view"),
        (EXTEND, "self.draft_extend_attn_backend.init"),
    ),
    "graph launches in model_context (verify: with its inputs' re-copy)": (
        (DRAFT, "with self.model_context()"),
        ("DecodeCudaGraphRunner._replay_kept", "with self.model_context()"),
        ("EAGLEDraftExtendCudaGraphRunner._replay_output", "out = replay()"),
    ),
    "outputs (verify's copy.copy, draft extend's new output with its clone)": (
        ("DecodeCudaGraphRunner._replay_kept", "if isinstance(output, LogitsProcessorOutput)"),
        ("EAGLEDraftExtendCudaGraphRunner._replay_output", "return LogitsProcessorOutput("),
    ),
}


def statement(rows, method, start):
    (us,) = [us for us, _, src in rows[method]["statements"] if src.startswith(start)]
    return us


for path in sorted(glob.glob("lines*.txt")):
    text = open(path).read()
    report = json.loads(text[text.index("LINES ") + 6 :].splitlines()[0])
    sizes = [int(k.split()[-1]) for k in report if k.startswith("single")]
    print(f"{path}: single calls, sizes in the order measured {sizes}")
    print("| part | " + " | ".join(f"bs {bs}" for bs in sizes) + " |")
    print("| --- |" + " --- |" * len(sizes))
    whole = {bs: sum(report[f"single bs {bs}"][m]["whole_us"] for m in ITERATION) for bs in sizes}
    print("| iteration (draft, verify's load_batch and execute, draft extend) | "
          + " | ".join(f"{whole[bs]:.1f}" for bs in sizes) + " |")
    rest = dict(whole)
    for part, where in PARTS.items():
        cells = []
        for bs in sizes:
            us = sum(statement(report[f"single bs {bs}"], m, s) for m, s in where)
            rest[bs] -= us
            cells.append(f"{us:.1f} ({100 * us / whole[bs]:.0f}%)")
        print(f"| {part} | " + " | ".join(cells) + " |")
    print("| the rest | " + " | ".join(f"{rest[bs]:.1f} ({100 * rest[bs] / whole[bs]:.0f}%)" for bs in sizes) + " |")
    print()
