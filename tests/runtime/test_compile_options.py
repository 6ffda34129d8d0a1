"""XLA compile options: on the CPU backend every program compiles at LLVM optimization level 2
(benchmarks/opt_level.py: compiles in 0.66-0.98x the time, runs within 2%), unless XLA_FLAGS
names a level, which then stands; on x86, LAZYXLA_CPU_FMA=0 rounds each op as eager does."""
import os
import platform
import subprocess
import sys

import jax
import pytest
import torch
from jax import stages

import lazyxla
from lazyxla import jaxenv
from lazyxla.runtime import compiler, executor


def test_programs_compile_at_level_2_on_the_cpu(monkeypatch):
    if jax.default_backend() != "cpu" or "xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", ""):
        assert compiler.compile_options() == {}
        return
    seen = []
    compile_ = stages.Lowered.compile

    def recording(self, compiler_options=None, **kwargs):
        seen.append(compiler_options)
        return compile_(self, compiler_options=compiler_options, **kwargs)
    monkeypatch.setattr(stages.Lowered, "compile", recording)
    executor.CACHE.clear()
    d = lazyxla.device()
    x = torch.arange(6.0).reshape(2, 3)
    y = (x.to(d) * 3 - 1).sum(0)
    assert torch.equal(y.cpu(), (x * 3 - 1).sum(0))
    assert seen == [{"xla_backend_optimization_level": 2}]


_PROGRAM = ("import torch, lazyxla; from lazyxla.runtime import compiler; d = lazyxla.device(); "
            "y = (torch.arange(4.0, device=d) + 1).cpu().tolist(); "
            "print('OK', y, compiler.compile_options())")


def test_a_level_named_in_xla_flags_stands():
    env = dict(os.environ, XLA_FLAGS="--xla_backend_optimization_level=3")
    out = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "OK [1.0, 2.0, 3.0, 4.0] {}" in out.stdout



# Rounding: XLA's CPU code fuses a*b+c into one rounding; on x86, LAZYXLA_CPU_FMA=0 caps it at
# AVX (no FMA instructions) so that each op rounds as eager's kernels do (jaxenv.ROUNDING_FLAG).
_X86_CPU = platform.machine().lower() in ("x86_64", "amd64") and jax.default_backend() == "cpu"
_HAS_FMA = not os.path.exists("/proc/cpuinfo") or "fma" in open("/proc/cpuinfo").read().split()
_PROBE = """
import torch, lazyxla
from lazyxla import jaxenv
d = lazyxla.device()
h = torch.randn(6, generator=torch.Generator().manual_seed(0))
residue = (h.to(d) * h.to(d) - (h.to(d) * h.to(d)).amax()).abs().min().item()
std = lambda x: ((x * x).mean() - x.mean() * x.mean()).sqrt()
nans = 0  # the sqrt of a constant's E[x*x] - E[x]**2: NaN where eager's is not
for c in torch.linspace(0.01, 3, 300):
    x = torch.full((4,), float(c))
    nans += bool(std(x.to(d)).isnan()) and not bool(std(x).isnan())
print("OK", residue, nans, repr(jaxenv.CPU_ROUNDING))
"""


def _probe(prelude="", **kw_env):
    env = dict(os.environ, **kw_env)
    if "XLA_FLAGS" not in kw_env:  # (this process's own cap, if any, is not the probe's)
        env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if f != jaxenv.ROUNDING_FLAG)
    out = subprocess.run([sys.executable, "-c", prelude + _PROBE], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("OK "))
    _, residue, nans, rounding = line.split(" ", 3)
    return float(residue), int(nans), rounding, out.stderr


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_lazyxla_cpu_fma_0_rounds_each_op_as_eager():
    residue, nans, rounding, _ = _probe(LAZYXLA_CPU_FMA="0")
    assert "each op rounded, as eager (LAZYXLA_CPU_FMA=0" in rounding
    assert residue == 0.0 and nans == 0
    residue, nans, rounding, _ = _probe(LAZYXLA_CPU_FMA="1")  # XLA's default: fused
    assert "fused multiply-adds (XLA's default)" in rounding
    assert (residue > 0 and nans > 0) or not _HAS_FMA  # (8e-9; 25 of 300 where measured)


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_the_cap_goes_before_flags_xla_would_stop_reading_at(tmp_path):
    # (XLA ignores what follows a word without dashes; the cap put after it did nothing)
    residue, _, rounding, _ = _probe(LAZYXLA_CPU_FMA="0",
                                     XLA_FLAGS="--xla_cpu_multi_thread_eigen=false threads=1")
    assert "each op rounded" in rounding and residue == 0.0
    flagfile = tmp_path / "xla_flags"
    flagfile.write_text("--xla_cpu_multi_thread_eigen=false\n")
    _, _, rounding, stderr = _probe(LAZYXLA_CPU_FMA="0", XLA_FLAGS=str(flagfile))
    assert "XLA_FLAGS names a file" in rounding and "cannot take effect" in stderr


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_an_isa_named_in_xla_flags_stands():
    residue, _, rounding, _ = _probe(LAZYXLA_CPU_FMA="0", XLA_FLAGS="--xla_cpu_max_isa=AVX2")
    assert "fused multiply-adds (XLA_FLAGS: xla_cpu_max_isa=AVX2)" in rounding
    assert residue > 0 or not _HAS_FMA
    residue, _, rounding, _ = _probe(XLA_FLAGS="--xla_cpu_max_isa=SSE4_2")
    assert "each op rounded, as eager (XLA_FLAGS caps XLA's CPU code at SSE4_2)" in rounding
    assert residue == 0.0


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_the_cap_asked_for_after_jax_started_is_warned_about():
    prelude = "import jax.numpy as jnp, warnings; jnp.ones(2).block_until_ready(); warnings.simplefilter('always')\n"
    _, _, rounding, stderr = _probe(prelude, LAZYXLA_CPU_FMA="0")
    assert "LAZYXLA_CPU_FMA=0 cannot take effect: JAX's backend started before lazyxla" in stderr
    assert "but JAX's backend started before lazyxla" in rounding


def test_the_report_says_how_xla_cpu_code_rounds():
    from lazyxla.report import collect
    assert collect()["cpu_rounding"] == jaxenv.CPU_ROUNDING
