"""torch.compile(backend="lazyxla") returns an output that is a conj/neg view as aot_eager does:
with its lazy bits (its value and `is_conj()`/`is_neg()` are eager's), and aot_autograd's
write-back of an input's new value through such an output stores that value."""
import pytest
import torch

import lazyxla

D = lazyxla.device()
Z = torch.tensor([[1 + 2j, 3 - 1j], [2j, 5 + 0j]])


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield


def _both(fn, grad=False, calls=2):
    """fn compiled by aot_eager on a CPU copy of Z and by lazyxla on a device copy, called `calls`
    times (the later calls replay the program); outputs (values and bits) and Z's values after."""
    got = []
    for dev, backend in (("cpu", "aot_eager"), (D, "lazyxla")):
        torch._dynamo.reset()
        a = Z.clone().to(dev).requires_grad_(grad)
        with torch.enable_grad() if grad else torch.no_grad():
            f = torch.compile(fn, backend=backend)
            for _ in range(calls):
                out = f(a)
        outs = out if isinstance(out, tuple) else (out,)
        got.append(([(o.is_conj(), o.is_neg(), o.detach().cpu().resolve_conj().resolve_neg())
                     for o in outs], a.detach().cpu()))
    (want, want_a), (have, have_a) = got
    assert [b[:2] for b in have] == [b[:2] for b in want]
    for (_, _, h), (_, _, w) in zip(have, want):
        torch.testing.assert_close(h, w)
    torch.testing.assert_close(have_a, want_a)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("fn", [
    lambda a: a.conj(),                  # a view of the input
    lambda a: (a * 2).conj(),            # a view of a computed value
    lambda a: a.mH,
    lambda a: (a + 1).conj().imag,       # a neg view
    lambda a: torch._neg_view(a * 1),
    lambda a: (a * 2, (a * 2).conj(), (a * 2).conj().T),  # views of one computed buffer
], ids=["input_conj", "computed_conj", "mH", "imag_of_conj", "neg_view", "shared"])
def test_output_that_is_a_conj_or_neg_view_keeps_its_bits(fn, grad):
    _both(fn, grad)


@pytest.mark.parametrize("fn", [
    lambda a: a.conj().imag.mul_(2),
    lambda a: a.conj().mul_(1j),
    lambda a: a.conj()[1:].add_(1),
], ids=["imag_of_conj", "conj", "slice_of_conj"])
def test_write_through_a_conj_view_of_an_input_is_eagers(fn):
    _both(fn, calls=1)  # (each call writes: one call compares the written value)


def test_plain_outputs_take_the_fast_path():
    """Bits are decided when the graph is extracted: outputs with none keep the slots-only path."""
    seen = []
    real_init = lazyxla.dynamo.outputs.OutputHandler.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        seen.append(self)
    lazyxla.dynamo.outputs.OutputHandler.__init__ = spy
    try:
        with torch.no_grad():
            torch.compile(lambda a: (a * 2, a + 1), backend="lazyxla")(Z.to(D))
            torch.compile(lambda a: (a * 2).conj(), backend="lazyxla")(Z.to(D))
    finally:
        lazyxla.dynamo.outputs.OutputHandler.__init__ = real_init
    assert seen[0].slots_only is not None and seen[0].bits == ()
    assert seen[1].slots_only is None and seen[1].bits == ((0, True, False),)
