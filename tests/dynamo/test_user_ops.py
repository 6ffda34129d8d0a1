"""A user's op (torch.library.custom_op) under torch.compile(backend="lazyxla"): its Python kernel
is traced once, so what it may read on the host is never replayed from the trace: its numbers are
keyed by value, and a CPU tensor it is given runs it outside the program, on every call."""
import torch

import lazyxla

D = lazyxla.device()


@torch.library.custom_op("lazyxla_test::scale_by_item", mutates_args=())
def scale_by_item(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return x * s.item()


@scale_by_item.register_fake
def _(x, s):
    return torch.empty_like(x)


@torch.library.custom_op("lazyxla_test::signed_scale", mutates_args=())
def signed_scale(x: torch.Tensor, n: int) -> torch.Tensor:
    return x * (n if n > 2 else -n)


@signed_scale.register_fake
def _(x, n):
    return torch.empty_like(x)


@torch.library.custom_op("lazyxla_test::clamped_div", mutates_args=())
def clamped_div(x: torch.Tensor, r: float) -> torch.Tensor:
    return x / max(r, 1.0)


@clamped_div.register_fake
def _(x, r):
    return torch.empty_like(x)


def test_a_cpu_scalar_a_user_op_reads_with_item_is_read_on_every_call():
    # the trace's .item() of the CPU tensor kept the first call's value: [2, 2, 2]
    torch._dynamo.reset()
    f = torch.compile(lambda x, s: scale_by_item(x, s) + 1, backend="lazyxla")
    x = torch.ones(2, device=D)
    got = [f(x, torch.tensor(v)).cpu().tolist() for v in (1.0, 3.0, 7.0)]
    assert got == [[2.0, 2.0], [4.0, 4.0], [8.0, 8.0]]


def test_an_int_a_user_ops_kernel_branches_on_is_keyed_not_fed():
    # fed as a runtime scalar, n=2 ran the program traced on the n > 2 side: [3, 3]
    torch._dynamo.reset()
    fn = lambda x, n: signed_scale(x, n) + 1  # noqa: E731
    f = torch.compile(fn, backend="lazyxla")
    x = torch.ones(2)
    for n in (1, 5, 2, -4):
        assert f(x.to(D), n).cpu().tolist() == fn(x, n).tolist(), n


def test_a_float_a_user_ops_kernel_transforms_is_keyed_not_fed():
    torch._dynamo.reset()
    fn = lambda x, r: clamped_div(x, r) * 2  # noqa: E731
    f = torch.compile(fn, backend="lazyxla")
    x = torch.ones(2)
    for r in (4.0, 0.5, 8.0, -3.0):
        assert f(x.to(D), r).cpu().tolist() == fn(x, r).tolist(), r


def test_an_aten_op_still_takes_its_numbers_fed():
    """The keying above is for users' ops only: an aten op's int argument stays fed, one
    program for every value."""
    torch._dynamo.reset()
    fn = lambda x, n: torch.ops.aten.mul.Tensor(x, n) + 1  # noqa: E731
    f = torch.compile(fn, backend="lazyxla")
    x = torch.ones(2)
    before = lazyxla.metrics.counter_value("UncachedCompile") or 0
    for n in (3, 5, 7, 9):
        assert f(x.to(D), n).cpu().tolist() == fn(x, n).tolist(), n
    assert (lazyxla.metrics.counter_value("UncachedCompile") or 0) - before <= 2
