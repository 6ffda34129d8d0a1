"""Results carry eager's strides: `x.t() * 2` and `x.t().clone()` are column-major in eager, and
PyTorch decides from strides whether reshape/contiguous/flatten alias or copy. With contiguous
results, `y.reshape(-1).add_(1)` changed y on lazyxla and not in eager."""
import pytest
import torch

import lazyxla

D = lazyxla.device()
X = torch.arange(24.).reshape(2, 3, 4)

RESULTS = {
    "scaled_transpose": lambda x: x.transpose(0, 2) * 2,
    "clone_of_permute": lambda x: x.permute(2, 0, 1).clone(),
    "sum_of_permutes": lambda x: x.permute(1, 2, 0) + x.permute(1, 2, 0),
    "channels_last_relu": lambda x: torch.relu(x[None].contiguous(memory_format=torch.channels_last)),
    "empty_like_transposed": lambda x: torch.empty_like(x.transpose(1, 2)).fill_(1),
    "to_dtype": lambda x: x.transpose(0, 1).to(torch.float64),
    # eager's kernels (not its meta kernel) give a channels-last convolution result
    "conv_of_channels_last_input": lambda x: torch.nn.functional.conv2d(
        x[None].contiguous(memory_format=torch.channels_last), torch.ones(2, 2, 2, 2, device=x.device)),
    "conv_of_channels_last_weight": lambda x: torch.nn.functional.conv2d(
        x[None], torch.ones(2, 2, 2, 2, device=x.device).contiguous(memory_format=torch.channels_last)),
    "conv_transpose_of_channels_last_input": lambda x: torch.nn.functional.conv_transpose2d(
        x[None].contiguous(memory_format=torch.channels_last), torch.ones(2, 2, 2, 2, device=x.device)),
    "conv_of_contiguous_input": lambda x: torch.nn.functional.conv2d(
        x[None], torch.ones(2, 2, 2, 2, device=x.device)),
}


@pytest.mark.parametrize("fn", RESULTS.values(), ids=RESULTS.keys())
def test_results_have_eagers_strides(fn):
    expected = fn(X)
    got = fn(X.to(D))
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected)


VIEWS = {
    "of_a_transpose": lambda x: x.transpose(0, 2).view(-1),
    "of_a_slice": lambda x: x[:, :, :2].view(-1),
    "of_a_permuted_result": lambda x: (x.permute(2, 0, 1) * 2).view(-1),
    "of_a_permuted_clone": lambda x: x.transpose(1, 2).clone().view(2, 12),
    "of_an_expand": lambda x: x[:, :1].expand(2, 3, 4).view(-1),
    "view_as_of_a_transpose": lambda x: x.transpose(1, 2).view_as(x),
}


@pytest.mark.parametrize("fn", VIEWS.values(), ids=VIEWS.keys())
def test_a_view_that_eagers_strides_forbid_raises_eagers_error(fn):
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        fn(X)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        fn(X.to(D))
    y = (X.to(D).permute(2, 0, 1) * 2).view(4, 6)  # merges dims adjacent in memory: a view
    assert y.stride() == (X.permute(2, 0, 1) * 2).view(4, 6).stride()


def _alias_program(dev):
    x = X[0].to(dev)
    y = x.t() * 2
    y.reshape(-1).add_(100)  # eager: y is column-major, reshape copies
    c = x.t().clone()
    c.t().contiguous().add_(1000)  # eager: c.t() is contiguous, contiguous() returns it
    f = (x.t() + 0).flatten()  # copies in eager
    f.zero_()
    return y, c, x


def test_reshape_and_contiguous_alias_or_copy_as_in_eager():
    for got, expected in zip(_alias_program(D), _alias_program("cpu")):
        torch.testing.assert_close(got.cpu(), expected)


def test_as_strided_of_a_permuted_result_addresses_eagers_memory_order():
    def f(x):
        y = x[0].t() * 2  # strides (1, 3): memory holds y.t()'s elements in order
        return y.as_strided((2, 2), (1, 3)), y[1:].as_strided((3,), (4,), 1)
    for got, expected in zip(f(X.to(D)), f(X)):
        torch.testing.assert_close(got.cpu(), expected)

    def write(x):
        y = x[0].t() * 1
        y.as_strided((2,), (1,), 2).fill_(-1)  # memory elements 2 and 3
        return y
    torch.testing.assert_close(write(X.to(D)).cpu(), write(X))


def test_channels_last_strides_of_size_1_dims_are_eagers_where_made():
    cl = torch.channels_last
    expected = torch.empty(1, 6, 1, 1, memory_format=cl).stride()  # (6, 1, 6, 6)
    assert torch.empty(1, 6, 1, 1, memory_format=cl, device=D).stride() == expected
    assert torch.randn(1, 6, 1, 1).to(D, memory_format=cl).stride() == expected


def test_transfers_keep_a_permuted_layout():
    t = X.permute(2, 0, 1)
    on = t.to(D)
    assert on.stride() == t.stride()
    back = on.cpu()
    assert back.stride() == t.stride()
    torch.testing.assert_close(back, t)
    view = X[0].to(D).t()  # a view with a permuted layout comes back with it
    assert view.cpu().stride() == X[0].t().stride()


# (a 4-d input: channels_last needs one)
TRANSFERS = {
    "to_device_channels_last": lambda x, d: x.to(d, memory_format=torch.channels_last),
    "to_device_float64_channels_last": lambda x, d: x.to(d, torch.float64,
                                                         memory_format=torch.channels_last),
    "channels_last_to_device_contiguous": lambda x, d: x.contiguous(
        memory_format=torch.channels_last).to(d, memory_format=torch.contiguous_format),
    "channels_last_to_device_preserved": lambda x, d: x.contiguous(
        memory_format=torch.channels_last).to(d),
    "expanded_to_device": lambda x, d: x[:, :1].expand(2, 3, 2, 2).to(d),
}


@pytest.mark.parametrize("fn", TRANSFERS.values(), ids=TRANSFERS.keys())
def test_a_transfer_to_the_device_takes_the_memory_format_asked_for(fn):
    x = torch.arange(24.).reshape(2, 3, 2, 2)
    on, eager = fn(x, D), fn(x, "meta")  # (meta: eager's strides for a device copy)
    assert on.stride() == eager.stride()
    torch.testing.assert_close(on.cpu(), fn(x, "cpu"))


@pytest.mark.parametrize("fmt", [torch.channels_last, torch.contiguous_format, torch.preserve_format])
@pytest.mark.parametrize("start", ["contiguous", "channels_last"])
def test_a_transfer_to_the_host_takes_the_memory_format_asked_for(fmt, start):
    x = torch.arange(24.).reshape(2, 3, 2, 2)
    if start == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    back, eager = x.to(D).to("cpu", memory_format=fmt), x.to("cpu", memory_format=fmt)
    assert back.stride() == eager.stride()
    torch.testing.assert_close(back, eager)


def test_module_to_device_in_channels_last_keeps_its_4d_weights_so():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    m = m.to(D, memory_format=torch.channels_last)
    assert m[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert m[1].weight.stride() == (1,)
