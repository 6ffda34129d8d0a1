"""XLA compile options: on the CPU backend every program compiles at LLVM optimization level 2
(benchmarks/opt_level.py: compiles in 0.66-0.98x the time, runs within 2%), unless XLA_FLAGS
names a level, which then stands."""
import os
import subprocess
import sys

import jax
import torch
from jax import stages

import lazyxla
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
