"""Runtime scalar arguments against eager, value by value: every aten op with a lowering and a
Scalar-typed argument, called as OpInfo's samples call it (captured once, three calls per op), then
with special values of that scalar (0, 1, -1, 2, 0.5, -0.5, 3.5, inf, -inf, NaN, 1000, -1000,
True) on the CPU and on lazyxla, lazyxla's meta cache primed with the sample's own value first:
signatures key these arguments by type, so a check that depends on the value must run on every
call. A sweep, not a random fuzz: SEED numbers the case (`python scalar_values.py 0 5000`; past the
last case a seed compares nothing). Compared: errors (type) and values. Random ops are left out."""
from __future__ import annotations

import math
import os
import re
import sys
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _driver import host, main, outcome, same_outcome  # noqa: E402

import lazyxla  # noqa: E402
from lazyxla.device import dispatch  # noqa: E402
from lazyxla.lowering.registry import LOWERINGS  # noqa: E402

D = lazyxla.device()
SPECIAL = [0, 1, -1, 2, 0.5, -0.5, 3.5, math.inf, -math.inf, math.nan, 1000, -1000, True]
_RANDOM = re.compile(r"rand|bernoulli|dropout|normal|uniform|exponential|cauchy|geometric")
# README: limits. eager's BLAS multiplies alpha into each product (inf - inf: NaN); norms of huge
# order underflow into subnormals, which XLA's CPU flushes to 0, and eager returns |x| over a dim
# of size 1 for a NaN order
_KNOWN = {("aten.addmm.default", "alpha"): (math.inf, -math.inf),
          ("aten.addbmm.default", "alpha"): (math.inf, -math.inf),
          ("aten.linalg_vector_norm.default", 1): (1000, -1000, math.nan)}


class _Capture(TorchDispatchMode):
    def __init__(self, calls):
        super().__init__()
        self.calls = calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in LOWERINGS and len(self.calls.get(func, ())) < 3 and not _RANDOM.search(str(func)):
            info = dispatch.op_info(func)
            where = [("a", i) for i, a in enumerate(args)
                     if i in info.scalar_pos and type(a) in (int, float, bool)]
            where += [("k", k) for k, v in kwargs.items()
                      if k in info.scalar_kw and type(v) in (int, float, bool)]
            if where:
                clone = tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (args, kwargs))
                self.calls.setdefault(func, []).append((clone, where))
        return func(*args, **kwargs)


def _cases():
    from torch.testing._internal.common_methods_invocations import op_db
    calls: dict = {}
    warnings.simplefilter("ignore")
    for op in op_db:
        for dt in (torch.float32, torch.int64):
            if dt not in op.supported_dtypes("cpu"):
                continue
            try:
                for s in list(op.sample_inputs("cpu", dt))[:6]:
                    with _Capture(calls):
                        op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 - a sample eager refuses: nothing captured from it
                pass
    cases = []
    for func in sorted(calls, key=str):
        for (args, kwargs), where in calls[func]:
            for w in where:
                orig = args[w[1]] if w[0] == "a" else kwargs[w[1]]
                for v in SPECIAL:
                    if (type(orig) is bool) != (type(v) is bool) or (type(orig) is int and type(v) is float):
                        continue
                    if any(v is k or v == k for k in _KNOWN.get((str(func), w[1]), ())):
                        continue
                    cases.append((func, args, kwargs, w, orig, v))
    return cases


CASES = _cases()


def _call(func, args, kwargs, where, value, device):
    move = (lambda t: t.to(device)) if device is not None else (lambda t: t.clone())
    a = list(tree_map(lambda t: move(t) if isinstance(t, torch.Tensor) else t, args))
    k = dict(tree_map(lambda t: move(t) if isinstance(t, torch.Tensor) else t, kwargs))
    if where[0] == "a":
        a[where[1]] = value
    else:
        k[where[1]] = value
    return host(func(*a, **k))


def run(seed):
    if seed >= len(CASES):
        return None
    func, args, kwargs, where, orig, value = CASES[seed]
    if outcome(lambda: _call(func, args, kwargs, where, orig, D))[0] == "error":
        return None  # (the sample itself does not run on lazyxla: OpInfo's sweep reports it)
    want = outcome(lambda: _call(func, args, kwargs, where, value, None))
    got = outcome(lambda: _call(func, args, kwargs, where, value, D))
    if same_outcome(want, got, 1e-4, 1e-4):
        return None
    return f"{func} {where} = {value!r} (after {orig!r}): eager {str(want)[:200]} lazyxla {str(got)[:200]}"


if __name__ == "__main__":
    raise SystemExit(main(run))
