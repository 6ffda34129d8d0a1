"""A view argument is fed from its buffer on every call, whatever was read of it before.

A lazyxla view remembers the value it last read, and a read that ran it (`.item()`, `.cpu()`)
left that value device data of its own. A graph extracted on such a view read that data, which no
argument feeds: the program kept it as a constant and every later call computed with the view's
value at extraction. A module whose buffer is updated with `+=` meets this without a view in
sight: with its argument a view of another buffer that the forward writes through a view,
aot_autograd hands back the updated buffer as a view of the old one, which Dynamo binds to the
module; read between calls, its next extraction froze the count.
"""
import contextlib
import logging

import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.arange(6.0))
        self.register_buffer("cnt", torch.zeros(()))

    def forward(self, x):
        x.add_(1)
        self.buf[1:3].mul_(2)
        self.cnt += 1
        return x * 2


def test_a_counter_buffer_advances_on_every_call_read_between_calls(caplog):
    eager, m = _Counting(), _Counting().to(D)
    cm = torch.compile(m, backend="lazyxla")
    seen, expected = [], []
    with caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        for _ in range(4):
            out = cm(m.buf[3:])
            seen.append(m.cnt.item())
            want = eager(eager.buf[3:])
            expected.append(eager.cnt.item())
            torch.testing.assert_close(out.cpu(), want)
    assert seen == expected == [1.0, 2.0, 3.0, 4.0]
    torch.testing.assert_close(m.buf.cpu(), eager.buf)
    # the one re-extraction: the rebound counter (aot_autograd's argument 1) is a view now
    assert caplog.text.count("re-extracting") == 1
    assert "an argument is a view now (argument 1)" in caplog.text


@pytest.mark.parametrize("mode", ["grad enabled", "no_grad"])
@pytest.mark.parametrize("read", [torch.Tensor.cpu, torch.Tensor.tolist], ids=["cpu", "tolist"])
def test_a_view_argument_read_before_its_first_call_is_fed_from_its_buffer(mode, read, fresh_metrics):
    ctx = torch.no_grad if mode == "no_grad" else contextlib.nullcontext
    cf = torch.compile(lambda v: v * 2, backend="lazyxla")
    base = torch.arange(6.0, device=D)
    v = base[2:]
    with ctx():
        read(v)
        torch.testing.assert_close(cf(v).cpu(), torch.tensor([4.0, 6.0, 8.0, 10.0]))
        base.add_(1)
        torch.testing.assert_close(cf(v).cpu(), torch.tensor([6.0, 8.0, 10.0, 12.0]))
        base.mul_(2)
        torch.testing.assert_close(cf(v).cpu(), torch.tensor([12.0, 16.0, 20.0, 24.0]))
    assert metrics.counter_value("DynamoExtractCompiledGraph") == 1


def test_a_view_argument_read_before_a_re_extraction_is_fed_from_its_buffer():
    """The second program (another view of the buffer) is traced after the read."""
    cf = torch.compile(lambda v: v + 1, backend="lazyxla")
    base = torch.arange(6.0, device=D)
    with torch.no_grad():
        cf(base[:3])
        v = base.view(2, 3)[1]
        v.cpu()
        torch.testing.assert_close(cf(v).cpu(), torch.tensor([4.0, 5.0, 6.0]))
        base.zero_()
        torch.testing.assert_close(cf(v).cpu(), torch.ones(3))


def test_the_notice_of_an_argument_that_is_a_view_now_names_it(caplog):
    cf = torch.compile(lambda a, b: a + b, backend="lazyxla")
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        cf(torch.ones(3, device=D), torch.ones(3, device=D))
        got = cf(torch.ones(3, device=D), torch.arange(4.0, device=D)[1:])
    torch.testing.assert_close(got.cpu(), torch.tensor([2.0, 3.0, 4.0]))
    assert "an argument is a view now (argument 1)" in caplog.text
