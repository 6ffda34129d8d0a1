"""Gradient checks shared by the reduction and linalg tests: lazyxla.testing.check_grad, plus none
of the area's own ops (forward or backward) ran on the CPU fallback. Fallbacks of ops that other
lowering modules own are reported as warnings only."""
import warnings

from lazyxla import metrics
from lazyxla.lowering.registry import LOWERINGS
from lazyxla.testing import check_grad

AREA = ("reduction", "linalg")
OWN = {str(op).split(".")[1] for op, low in LOWERINGS.items()
       if getattr(low.fn, "__module__", "").rsplit(".", 1)[-1] in AREA}


def grad_check(fn, *args, **kw):
    before = set(metrics.executed_fallback_ops())
    check_grad(fn, *args, **kw)
    new = set(metrics.executed_fallback_ops()) - before
    mine = sorted(n for n in new if n.split(".")[0].rstrip("_") in OWN)
    assert not mine, f"ops of this area fell back to the CPU: {mine}"
    if new:
        warnings.warn(f"other ops fell back to the CPU: {sorted(new)}")
