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


def outcome(fn):
    """("ok", value) or ("error", exception type name, first line of its message)."""
    try:
        return ("ok", fn())
    except Exception as e:
        return ("error", type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "")


def close(expected, actual, rtol=1e-5, atol=1e-5) -> bool:
    """Same shape, dtype and values (NaN equal to NaN)."""
    import torch
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False
    if expected.is_floating_point() or expected.is_complex():
        return torch.allclose(expected, actual, rtol=rtol, atol=atol, equal_nan=True)
    return torch.equal(expected, actual)
