"""XLA compile options: on the CPU backend every program compiles at LLVM optimization level 2
(benchmarks/opt_level.py: compiles in 0.66-0.98x the time, runs within 2%), unless XLA_FLAGS
names a level, which then stands; on x86 XLA's CPU code rounds each op as eager does."""
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



# Rounding: on x86, XLA's CPU code is capped at AVX (no FMA instructions) so that each op rounds
# as eager's kernels do (jaxenv.ROUNDING_FLAG); XLA would otherwise fuse a*b+c into one rounding.
_X86_CPU = platform.machine().lower() in ("x86_64", "amd64") and jax.default_backend() == "cpu"
_PROBE = ("import torch, lazyxla; from lazyxla import jaxenv; d = lazyxla.device(); "
          "h = torch.randn(6, generator=torch.Generator().manual_seed(0)).to(d); "
          "print('OK', (h * h - (h * h).amax()).abs().min().item(), repr(jaxenv.CPU_ROUNDING))")


def _probe(**env):
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("OK "))
    return float(line.split()[1]), line, out.stderr


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_a_difference_eager_rounds_to_zero_is_zero():
    d = lazyxla.device()
    h = torch.randn(6, generator=torch.Generator().manual_seed(0))
    top = (h.to(d) * h.to(d) - (h.to(d) * h.to(d)).amax()).abs().min()
    assert top.item() == 0.0  # (fused: the product's rounding residue, 8e-9)
    # the variance of a constant, E[x*x] - E[x]**2: fused multiply-adds made it negative, its
    # sqrt NaN, for 25 of 300 constants where eager's is 0 or a number
    for c in torch.linspace(0.01, 3, 60):
        x = torch.full((4,), float(c))
        std = lambda x: ((x * x).mean() - x.mean() * x.mean()).sqrt()  # noqa: E731
        assert std(x.to(d)).isnan().item() == std(x).isnan().item(), float(c)


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_the_rounding_cap_yields_to_the_users_choice():
    flags = os.environ.get("XLA_FLAGS", "")
    residue, line, _ = _probe(LAZYXLA_CPU_FMA="1", XLA_FLAGS=flags.replace(jaxenv.ROUNDING_FLAG, ""))
    assert "LAZYXLA_CPU_FMA=1" in line
    has_fma = "fma" in open("/proc/cpuinfo").read().split() if os.path.exists("/proc/cpuinfo") else True
    assert residue > 0 or not has_fma  # XLA's own code, fused
    residue, line, _ = _probe(XLA_FLAGS="--xla_cpu_max_isa=AVX2")
    assert "fused multiply-adds (XLA_FLAGS: xla_cpu_max_isa=AVX2)" in line
    assert residue > 0 or not has_fma
    residue, line, _ = _probe(XLA_FLAGS="--xla_cpu_max_isa=SSE4_2")
    assert "each op rounded, as eager (XLA_FLAGS caps XLA's CPU code at SSE4_2)" in line
    assert residue == 0


@pytest.mark.skipif(not _X86_CPU, reason="the cap is for XLA's x86 CPU code")
def test_jax_started_before_lazyxla_is_warned_about():
    program = ("import jax, jax.numpy as jnp; jnp.ones(2).block_until_ready(); "
               "import warnings; warnings.simplefilter('always'); " + _PROBE)
    env = dict(os.environ, XLA_FLAGS=os.environ.get("XLA_FLAGS", "").replace(jaxenv.ROUNDING_FLAG, ""))
    env.pop("LAZYXLA_CPU_FMA", None)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "JAX's backend started before lazyxla was imported" in out.stderr
    assert "JAX's backend started before lazyxla" in out.stdout


def test_the_report_names_fused_rounding_only():
    from lazyxla.report import collect, render_text
    rep = collect()
    assert ("XLA's CPU code rounds" in render_text(rep)) == ("fused" in jaxenv.CPU_ROUNDING)
    fused = dict(rep, cpu_rounding="fused multiply-adds (LAZYXLA_CPU_FMA=1)")
    assert "  XLA's CPU code rounds: fused multiply-adds (LAZYXLA_CPU_FMA=1)" in render_text(fused)
