"""Host memory on the CPU backend, where XLA's buffers are host memory: with the glibc settings the
README gives, a run's buffers reuse what the last run freed instead of fresh pages from the OS, and
torch.accelerator.empty_cache() returns the memory kept that way (lazyxla/host_malloc.py)."""
import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the settings are glibc's")

# README, "Host memory on the CPU backend" (read by glibc when the process starts)
from benchmarks.host_malloc import RECIPE  # noqa: E402

# Each run makes `n` outputs of `mb` MB and frees the last run's: the median run's page faults from
# run 6 on; then the RSS that empty_cache gives back once every tensor is gone.
_PROGRAM = r"""
import json, resource, statistics, sys, torch, lazyxla
mb, n = int(sys.argv[1]), int(sys.argv[2])
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
x = torch.ones(mb * 256, 1024, device="lazyxla")
per_run = []
for i in range(20):
    f0 = faults()
    ys = [x * k for k in range(1, n + 1)]
    lazyxla.sync(); lazyxla.wait()
    per_run.append(faults() - f0)
assert [y[-1, -1].item() for y in ys] == [float(k) for k in range(1, n + 1)]
del x, ys
before = rss_mb()
torch.accelerator.empty_cache()
print(json.dumps({"faults_per_run": statistics.median(per_run[5:]), "rss_returned_mb": before - rss_mb()}))
"""


def _run(mb, n, env):
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")},
               JAX_PLATFORMS="cpu", **env)
    out = subprocess.run([sys.executable, "-c", _PROGRAM, str(mb), str(n)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mb,n", [(4, 4), (16, 4), (40, 2)])
def test_with_the_readme_settings_runs_reuse_freed_memory_and_empty_cache_returns_it(mb, n):
    r = _run(mb, n, RECIPE)
    # fresh memory would fault on each of the outputs' mb * n * 256 pages, every run
    assert r["faults_per_run"] < 50, r
    assert r["rss_returned_mb"] > mb * n / 2, r


def test_glibcs_defaults_map_a_large_output_afresh_every_run():
    """(What the settings remove: a buffer above glibc's 32 MB mmap threshold, every run.)"""
    assert _run(40, 2, {})["faults_per_run"] > 10000
