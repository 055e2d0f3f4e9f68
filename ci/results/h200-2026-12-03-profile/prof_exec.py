"""cProfile each runner's execute in steady state (calls after the first 10), one Profile per runner.

python .prof/prof_exec.py OUTDIR -- runner_check args...
"""
import cProfile
import sys

out = sys.argv[1]
argv = sys.argv[3:]
sys.path.insert(0, "scripts")
from mla_harness import runner_check  # noqa: E402

orig = runner_check.RunnerCheck.time_execute
profiles = {}


def time_execute(self, repeats, warmup=3):
    for r in self.runners:
        label = (r.label or r.name).replace(" ", "_").replace("(", "").replace(")", "")
        prof = profiles.setdefault(label, cProfile.Profile())
        execute = r.runner.execute
        calls = [0]

        def wrapped(*a, _e=execute, _p=prof, _c=calls, **k):
            _c[0] += 1
            if _c[0] <= 10:
                return _e(*a, **k)
            _p.enable()
            try:
                return _e(*a, **k)
            finally:
                _p.disable()

        r.runner.execute = wrapped
    return orig(self, repeats, warmup)


runner_check.RunnerCheck.time_execute = time_execute
try:
    runner_check.main(argv)
finally:
    for label, prof in profiles.items():
        prof.dump_stats(f"{out}/{label}.prof")
