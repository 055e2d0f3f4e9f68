"""Run 0013's upstream class ``TestKeptReplayBuiltByInit`` on one tree's runners, on CPU.

    T=build/v0.5.23/sglang/test/registered/attention/unittests/test_runner_kept_replay.py
    python scripts/kit_probe/run_kept_replay_cases.py --test-file $T \
        --tree build/v0.5.23/base/python

The class (0013's ``test_runner_kept_replay.py``) skips without CUDA and
its kit entry points default to ``device="cuda"``. This imports the file with
``--tree``'s sglang first on the path and runs the class's own test method
once per entry of its ``CASES``, that entry's kit entry point called with
``device="cpu"``: the kit builds the EAGLE draft (or draft-extend) runner
through its ``__init__``, captures at the case's batch size and at twice it,
and compares each replay's output with its eager forward's, while the method
counts the runner's kept replays. Stand-ins: ``kit_env``'s (the triton
backend runs its own kernels under TRITON_INTERPRET=1), replacement 16 (the
graphs re-run eagerly, every re-run touching the storages its capture did)
with 28, and 27. The file can come from another tree than the runners: the
patched tree's file on v0.5.23's runners fails where they keep no replay.
Prints one JSON line per case.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kit_env  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", required=True, help="python/ root whose sglang (and kit) runs")
    p.add_argument("--test-file", required=True)
    args = p.parse_args()
    kit_env.enter(args.tree)
    kit_env.install()
    from mla_harness import replacements

    replacements.install_inert_modules(replacements.SERVER_MODULES)
    if importlib.util.find_spec("datasets") is None:  # replacement 20
        sys.meta_path.insert(0, replacements._AbsentFinder(["datasets"]))

    import torch

    spec = importlib.util.spec_from_file_location("kept_replay_test", args.test_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = module.TestKeptReplayBuiltByInit
    failures = 0
    for runner_cls, kept, run_case, case in cls.CASES:
        test = cls("test_kept_at_a_captured_size")
        test.CASES = ((runner_cls, kept, functools.partial(run_case, device="cpu"), case),)
        t0 = time.time()
        err = None
        try:
            with (
                replacements.eager_graph_backend(capture_context=True),
                replacements.kit_runner_cases_on_cpu(),
                kit_env.device_ctx(),
                torch.no_grad(),
            ):
                test.test_kept_at_a_captured_size()
        except Exception as exc:  # the case's failure, reported
            err = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
            failures += 1
        rec = {"case": case.name, "runner": runner_cls.__name__, "ok": err is None}
        rec["s"] = round(time.time() - t0, 1)
        if err:
            rec["error"] = err
        print(json.dumps(rec), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
