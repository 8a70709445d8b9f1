"""Runs a training script (like `python3 script.py args`) and, at exit, prints the median interval between
consecutive optimizer steps after the first --warmup steps: `STEP-TIME median_ms=<x> steps=<n>`. With
--instrument, shepherd_client.install() runs first (the zero-code mode). The timing wrapper is installed
after the instrumentation, so the measured interval includes its per-step work. Used by stock_overhead.py."""
import atexit
import runpy
import statistics
import sys
import time

args = sys.argv[1:]
instrument = args and args[0] == "--instrument"
if instrument:
    args = args[1:]
    import shepherd_client

    shepherd_client.install()
import torch  # noqa: E402

ends = []
orig_init = torch.optim.Optimizer.__init__


def init(self, *a, **k):
    orig_init(self, *a, **k)
    step = self.step

    def timed(*sa, **sk):
        out = step(*sa, **sk)
        ends.append(time.perf_counter())
        return out

    self.step = timed


torch.optim.Optimizer.__init__ = init


def report():
    gaps = [b - a for a, b in zip(ends[50:], ends[51:])]
    if gaps:
        print("STEP-TIME median_ms=%.4f steps=%d" % (statistics.median(gaps) * 1e3, len(gaps)), flush=True)


atexit.register(report)
sys.argv = args
runpy.run_path(args[0], run_name="__main__")
