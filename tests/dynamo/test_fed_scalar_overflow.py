"""A compiled function's int argument, fed to its program on every call (input_items.py), must
still be checked against the dtype it is converted to: eager raises "value cannot be converted to
type int8_t without overflow" for 300 into an int8 result, and the fed program wrapped it
(`torch.where(x > 1, x, 300)` of int8 gave 44). The checks run on each call's fed value."""
import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()
X = torch.tensor([0, 1, 2, 3], dtype=torch.int8)


def _setitem(x, n):
    y = x.clone()
    y[0] = n
    return y


CASES = {
    "where_other": lambda x, n: torch.where(x > 1, x, n),
    "where_self": lambda x, n: torch.where(x > 1, n, x),
    "full": lambda x, n: torch.full((2,), n, dtype=torch.int8, device=x.device),
    "setitem": _setitem,
    "scalar_tensor": lambda x, n: torch.scalar_tensor(n, dtype=torch.int8, device=x.device),
    "add_alpha": lambda x, n: torch.add(x, x, alpha=n),
    "sub_alpha": lambda x, n: torch.sub(x, x, alpha=n),
    "addcmul_value": lambda x, n: torch.addcmul(x, x, x, value=n),
}


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_a_fed_int_the_dtype_cannot_hold_raises_eagers_error(fn):
    compiled = torch.compile(fn, backend="lazyxla")
    for n in (3, 4):  # (the second makes n a fed SymInt)
        torch.testing.assert_close(compiled(X.to(D), n).cpu(), fn(X, n))
    extracted = metrics.counter_value("DynamoExtractCompiledGraph")
    for n in (300, -200):
        with pytest.raises(RuntimeError) as cpu:
            fn(X, n)
        with pytest.raises(RuntimeError) as dev:
            compiled(X.to(D), n).cpu()
        assert str(dev.value) == str(cpu.value)
    torch.testing.assert_close(compiled(X.to(D), -7).cpu(), fn(X, -7))  # still fed
    assert metrics.counter_value("DynamoExtractCompiledGraph") == extracted


def test_a_fed_float_alpha_of_float32_tensors_takes_no_check():
    """An lr fed as alpha (`p.add_(g, alpha=-lr)`): a float32 result holds any such value, so the
    fed program runs no check for it."""
    from lazyxla.dynamo import input_items
    fn = lambda p, g, lr: p.add(g, alpha=-lr)  # noqa: E731
    compiled = torch.compile(fn, backend="lazyxla")
    p, g = torch.ones(3), torch.full((3,), 2.0)
    checks = []
    original = input_items.run_checks
    input_items.run_checks = lambda c, fed: (checks.extend(c), original(c, fed))
    try:
        for lr in (0.1, 0.2, 0.3):
            torch.testing.assert_close(compiled(p.to(D), g.to(D), lr).cpu(), fn(p, g, lr))
    finally:
        input_items.run_checks = original
    assert checks == []
