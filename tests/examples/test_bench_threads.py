"""Every system of the benchmark computes on the same number of threads: XLA's CPU runtime sizes
its pools by the process's CPU affinity when it starts (XLA_FLAGS no longer cap them: a matmul
used 1.9 cores where eager used 1), so the worker starts it pinned (benchmarks/worker.py)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import os, resource, time
from benchmarks.worker import start_xla_runtime
cores = os.sched_getaffinity(0)
n = start_xla_runtime("lazy", 1)
import jax, jax.numpy as jnp
masks = []
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/status") as f:
        line = next(l for l in f if l.startswith("Cpus_allowed_list"))
    masks.append(line.split()[1])
f = jax.jit(lambda a: a @ a)
a = jnp.ones((512, 512))
jax.block_until_ready(f(a))
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
while time.perf_counter() - t0 < 0.5:
    jax.block_until_ready(f(a))
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
used = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (t1 - t0)
print(n, len(os.sched_getaffinity(0)) == len(cores), sum(m == str(min(cores)) for m in masks), round(used, 2))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity control and two cores")
def test_the_xla_runtime_computes_on_one_core_and_the_main_thread_keeps_all():
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    n, main_keeps_all, pinned_threads, cores_used = out.stdout.split()[-4:]
    assert n == "1" and main_keeps_all == "True"
    assert int(pinned_threads) >= 1  # XLA's threads, started on the first core
    assert float(cores_used) < 1.3  # unpinned: 1.8-1.9 on an idle machine with two cores


def test_systems_without_xla_are_not_pinned():
    from benchmarks.worker import start_xla_runtime
    assert start_xla_runtime("eager", 1) is None
    assert start_xla_runtime("inductor", 1) is None
