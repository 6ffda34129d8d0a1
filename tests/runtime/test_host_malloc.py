"""Host memory on the CPU backend, where XLA's buffers are host memory: with the glibc settings lazyxla
makes at import (or the same ones from the environment), a run's buffers reuse what the last run
freed instead of fresh pages from the OS, and torch.accelerator.empty_cache() returns the memory kept
that way (lazyxla/host_malloc.py)."""
import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the settings are glibc's")

from lazyxla.host_malloc import SETTINGS  # noqa: E402

# Each run makes `n` outputs of `mb` MB and frees the last run's: the median run's page faults over
# runs 21-40; then the RSS that empty_cache gives back once every tensor is gone. (The first runs
# may take fresh memory while the heap grows to what the steady state needs: with every thread on
# the main heap and one 100 MB output, 3 to 8 runs of 40 did, the last of them as late as run 27.)
_PROGRAM = r"""
import json, resource, statistics, sys
if sys.argv[3] == "jax first":
    import jax
    jax.numpy.ones(4).block_until_ready()
import torch, lazyxla
mb, n = int(sys.argv[1]), int(sys.argv[2])
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
x = torch.ones(mb * 256, 1024, device="lazyxla")
per_run = []
for i in range(40):
    f0 = faults()
    ys = [x * k for k in range(1, n + 1)]
    lazyxla.sync(); lazyxla.wait()
    per_run.append(faults() - f0)
assert [y[-1, -1].item() for y in ys] == [float(k) for k in range(1, n + 1)]
del x, ys
before = rss_mb()
torch.accelerator.empty_cache()
print(json.dumps({"faults_per_run": statistics.median(per_run[20:]), "rss_returned_mb": before - rss_mb(),
                  "host_memory": json.loads(lazyxla.report(as_json=True))["host_memory"]}))
"""


def _run(mb, n, env, order="lazyxla first"):
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")
                and k not in ("LAZYXLA_HOST_MALLOC", "GLIBC_TUNABLES")}, JAX_PLATFORMS="cpu", **env)
    out = subprocess.run([sys.executable, "-c", _PROGRAM, str(mb), str(n), order], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def _reuses(r, mb, n):
    # fresh memory would fault on each of the outputs' mb * n * 256 pages, every run
    return r["faults_per_run"] < 50 and r["rss_returned_mb"] > mb * n / 2


# Outputs small and large, many to a heap of XLA's threads or more than one holds (4 x 16 MB, 6 x
# 30 MB), and, with every thread on the main heap (MALLOC_ARENA_MAX=1), one output larger than a
# heap of XLA's threads (100 MB).
@pytest.mark.parametrize("mb,n,env", [(4, 4, {}), (40, 2, {}), (16, 4, {}), (30, 6, {}),
                                      (100, 1, {"MALLOC_ARENA_MAX": "1"})])
def test_by_default_runs_reuse_freed_memory_and_empty_cache_returns_it(mb, n, env):
    r, _ = _run(mb, n, env)
    assert r["host_memory"].startswith("freed memory kept for the next run (MALLOC_TRIM_THRESHOLD_="), r
    assert ("from the environment: MALLOC_ARENA_MAX=1" in r["host_memory"]) == bool(env), r
    assert _reuses(r, mb, n), r


def test_one_output_larger_than_a_heap_of_xlas_threads_still_maps_afresh():
    """(The limit README states: XLA's threads allocate from heaps of 64 MB at most, so a buffer
    above that is mapped for each run unless every thread is on the main heap, as above.)"""
    r, _ = _run(100, 1, {})
    assert r["host_memory"].startswith("freed memory kept"), r
    assert r["faults_per_run"] > 20000, r


def test_settings_of_the_same_kind_in_the_environment_stand():
    r, _ = _run(40, 2, {k: str(v) for k, _, v in SETTINGS})
    assert r["host_memory"] == ("glibc's settings from the environment (MALLOC_TRIM_THRESHOLD_, "
                                "MALLOC_MMAP_MAX_, MALLOC_TOP_PAD_)"), r
    assert _reuses(r, 40, 2), r  # (the same settings, read by glibc at start)
    r, _ = _run(4, 1, {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=100"})
    assert r["host_memory"] == "glibc's settings from the environment (GLIBC_TUNABLES)", r


def test_turned_off_glibcs_defaults_map_a_large_output_afresh_every_run():
    """(What the setting removes: a buffer above glibc's 32 MB mmap threshold, every run.)"""
    r, _ = _run(40, 2, {"LAZYXLA_HOST_MALLOC": "0"})
    assert r["host_memory"] == "glibc's defaults (LAZYXLA_HOST_MALLOC=0)", r
    assert r["faults_per_run"] > 10000, r


def test_set_after_jax_started_it_reaches_its_threads_too():
    """mallopt's settings are the process's: an import of lazyxla after JAX ran works as well."""
    r, _ = _run(40, 2, {}, order="jax first")
    assert r["host_memory"].startswith("freed memory kept"), r
    assert _reuses(r, 40, 2), r


def test_an_accelerator_backend_keeps_glibcs_defaults():
    """Host memory is not an accelerator's device memory: nothing to gain there. (Judged from
    JAX_PLATFORMS without starting the backend: a script with JAX_PLATFORMS=tpu,cpu is told.)"""
    out = subprocess.run([sys.executable, "-c", "import lazyxla.jaxenv as j; print(j.HOST_MEMORY)"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, JAX_PLATFORMS="tpu,cpu"))
    assert out.stdout.strip() == "glibc's defaults (an accelerator backend: host memory is not its device memory)", out
