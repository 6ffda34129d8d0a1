"""The long differential fuzzes' shared driver: `run(seed)` returns None where lazyxla agrees
with eager, else a description of the difference. Not part of `make test` (minutes to hours);
run one as `python tests/fuzz/long/<name>.py FIRST_SEED LAST_SEED [options]`."""
from __future__ import annotations

import sys
import traceback
import warnings


def main(run, argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(f"usage: {sys.argv[0]} FIRST_SEED LAST_SEED", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    lo, hi = int(argv[0]), int(argv[1])
    differ = 0
    for seed in range(lo, hi):
        try:
            diff = run(seed)
        except Exception:  # a crash of lazyxla (eager's own errors are compared by run)
            diff = ("crash", traceback.format_exc()[-600:])
        if diff:
            differ += 1
            print(seed, diff, flush=True)
    print(f"{differ} of {hi - lo} differ")
    return 1 if differ else 0


def define(source: str, name: str = "f"):
    """The function a generated `source` defines (it may use `torch`)."""
    import torch
    scope = {"torch": torch}
    exec(source, scope)
    return scope[name]


def outcome(fn):
    """("ok", value) or ("error", exception type name, first line of its message). A NameError
    or AttributeError raised by a fuzz script itself is its own bug, raised: compared as an error
    of both sides, it would make every seed agree."""
    try:
        return ("ok", fn())
    except (NameError, AttributeError) as e:
        if _raised_in_a_fuzz(e):
            raise
        return ("error", type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "")
    except Exception as e:
        return ("error", type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "")


def _raised_in_a_fuzz(e) -> bool:
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return "/tests/fuzz/long/" in tb.tb_frame.f_code.co_filename.replace("\\", "/")


def close(expected, actual, rtol=1e-5, atol=1e-5) -> bool:
    """Same shape, dtype and values (NaN equal to NaN)."""
    import torch
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False
    if expected.is_floating_point() or expected.is_complex():
        return torch.allclose(expected, actual, rtol=rtol, atol=atol, equal_nan=True)
    return torch.equal(expected, actual)


def host(v):
    """Tensors, in any nesting of tuples and lists (torch.return_types are tuples), on the CPU."""
    import torch
    if isinstance(v, torch.Tensor):
        return v.cpu()
    if isinstance(v, (tuple, list)):
        return tuple(host(x) for x in v)
    return v


def same_outcome(want, got, rtol=1e-5, atol=1e-5) -> bool:
    """Two outcome()s agree: errors of one type, or values close() one by one (NaN equal)."""
    import math

    import torch
    if want[0] != got[0]:
        return False
    if want[0] == "error":
        return want[1] == got[1]
    x, y = want[1], got[1]
    if isinstance(x, torch.Tensor):
        return isinstance(y, torch.Tensor) and close(x, y, rtol, atol)
    if isinstance(x, tuple):
        return isinstance(y, tuple) and len(x) == len(y) and all(
            same_outcome(("ok", p), ("ok", q), rtol, atol) for p, q in zip(x, y))
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
