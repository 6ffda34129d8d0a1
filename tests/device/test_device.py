"""The lazyxla device behaves like a PyTorch device."""
import pytest
import torch

import lazyxla
from lazyxla.testing import check


def test_device_object():
    assert lazyxla.device() == torch.device("lazyxla", 0)
    assert str(lazyxla.device()) == "lazyxla:0"
    with pytest.raises(ValueError):
        lazyxla.device(1)
    for bad in (0.0, False, "0", None):  # (0.0 and False passed as index 0)
        with pytest.raises(TypeError, match="device index as an int"):
            lazyxla.device(bad)
    with pytest.raises(TypeError, match="wait must be a bool"):
        lazyxla.sync(wait="no")


@pytest.mark.parametrize("make", [
    lambda d: torch.zeros(2, 3, device=d),
    lambda d: torch.ones(2, 3, device=d, dtype=torch.int64),
    lambda d: torch.full((2, 2), 7.5, device=d),
    lambda d: torch.arange(6, device=d),
    lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
    lambda d: torch.empty(3, device=d).fill_(2),
], ids=["zeros", "ones_int", "full", "arange", "tensor", "empty_fill"])
def test_factories_match_cpu(make):
    cpu = make("cpu")
    dev = make(lazyxla.device())
    assert dev.device.type == "lazyxla"
    assert dev.dtype == cpu.dtype and dev.shape == cpu.shape
    torch.testing.assert_close(dev.cpu(), cpu)


# Calls whose result dtype is the default dtype: each is first recorded under float32, then again
# under float64 (the recording caches shape inference per call signature).
DEFAULT_DTYPE_CALLS = {
    "zeros": lambda d: torch.zeros(2, device=d),
    "empty": lambda d: torch.empty(2, device=d),
    "full_float": lambda d: torch.full((2,), 1.5, device=d),
    "arange_float": lambda d: torch.arange(2., device=d),
    "linspace": lambda d: torch.linspace(0, 1, 3, device=d),
    "eye": lambda d: torch.eye(2, device=d),
    "rand": lambda d: torch.rand(2, device=d),
    "int_tensor_times_float": lambda d: torch.ones(2, dtype=torch.int64, device=d) * 0.5,
    "int_tensor_true_divide": lambda d: torch.ones(2, dtype=torch.int64, device=d) / 2,
}


@pytest.mark.parametrize("make", DEFAULT_DTYPE_CALLS.values(), ids=DEFAULT_DTYPE_CALLS.keys())
def test_results_take_the_default_dtype_in_force_at_each_call(make):
    dev = lazyxla.device()
    assert make(dev).dtype == make("cpu").dtype == torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out = make(dev)
        assert out.dtype == make("cpu").dtype == torch.float64
        if make not in (DEFAULT_DTYPE_CALLS["empty"], DEFAULT_DTYPE_CALLS["rand"]):
            torch.testing.assert_close(out.cpu(), make("cpu"))  # (float64 values, as eager's)
    finally:
        torch.set_default_dtype(old)
    assert make(dev).dtype == torch.float32


def test_randn_shape_dtype():
    x = torch.randn(3, 4, device=lazyxla.device())
    assert x.shape == (3, 4) and x.dtype == torch.float32
    assert torch.isfinite(x.cpu()).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16,
                                   torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                                   torch.bool])
def test_round_trip_every_dtype(dtype):
    x = (torch.arange(12).reshape(3, 4) - 5).to(dtype)
    y = x.to(lazyxla.device())
    assert y.dtype == dtype
    back = y.cpu()
    assert back.dtype == dtype
    torch.testing.assert_close(back, x)
    torch.testing.assert_close(y.to("cpu"), x)


@pytest.mark.parametrize("dtype", [torch.float8_e8m0fnu, torch.bits8, torch.complex32])
def test_moving_a_tensor_of_a_dtype_lazyxla_lacks_says_so(dtype):
    # numpy's conversion raised "Got unsupported ScalarType Float8_e8m0fnu"
    x = torch.zeros(2, dtype=torch.uint8).view(dtype) if dtype == torch.bits8 else torch.ones(2).to(dtype)
    with pytest.raises(TypeError, match=f"lazyxla does not support dtype {dtype}"):
        x.to(lazyxla.device())


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                                   torch.float8_e5m2fnuz])
def test_float8_round_trip_and_casts_saturate_or_overflow_as_eager(dtype):
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), 1e6, 500.0, 1.5, -3.25, 0.0])
    expected = x.to(dtype)
    moved = expected.to(lazyxla.device()).cpu()  # transfers keep the bits
    assert torch.equal(moved.view(torch.uint8), expected.view(torch.uint8))
    converted = x.to(lazyxla.device()).to(dtype)  # NaN's bit pattern may differ
    torch.testing.assert_close(converted.cpu().float(), expected.float(), equal_nan=True)
    torch.testing.assert_close(converted.float().cpu(), expected.float(), equal_nan=True)
    for ints in (torch.tensor([500, -1000, 3, 0]), torch.tensor([200, -100, 3, 0], dtype=torch.int16),
                 torch.tensor([True, False])):  # integers saturate too (500 gives e4m3fn's 448)
        torch.testing.assert_close(ints.to(lazyxla.device()).to(dtype).float().cpu(),
                                   ints.to(dtype).float(), equal_nan=True)
        into = torch.zeros(ints.shape, dtype=dtype, device=lazyxla.device()).copy_(ints.to(lazyxla.device()))
        torch.testing.assert_close(into.float().cpu(), ints.to(dtype).float(), equal_nan=True)
    a = torch.full((2, 2), 16.0).to(dtype)  # a product past the dtype's range: eager's saturation
    torch.testing.assert_close((a.to(lazyxla.device()) @ a.to(lazyxla.device())).float().cpu(),
                               (a @ a).float(), equal_nan=True)


def test_int64_is_not_truncated():
    big = torch.tensor([2**40 + 3, -(2**50)], dtype=torch.int64)
    check(lambda t: t + 1, big)
    f64 = torch.tensor([1.0 + 2**-40], dtype=torch.float64)
    check(lambda t: t * 1, f64)


def test_item_tolist_print_bool():
    x = torch.tensor([[1.5, -2.0], [3.0, 4.0]]).to(lazyxla.device())
    assert x[0, 0].item() == 1.5
    assert x.tolist() == [[1.5, -2.0], [3.0, 4.0]]
    assert bool(x[1, 1] > 3)
    assert not bool(x[0, 1] > 0)
    text = repr(x)
    assert "lazyxla:0" in text and "1.5000" in text
    if x.sum() > 0:  # data-dependent Python control flow materialises
        pass


def test_numpy_raises_like_cuda():
    x = torch.ones(2, device=lazyxla.device())
    with pytest.raises(TypeError, match="lazyxla"):
        x.numpy()


def test_module_to_device_and_back():
    m = torch.nn.Linear(3, 2)
    ref = m(torch.ones(1, 3))
    m.to(lazyxla.device())
    assert m.weight.device.type == "lazyxla"
    out = m(torch.ones(1, 3, device=lazyxla.device()))
    torch.testing.assert_close(out.cpu(), ref.detach())
    m.to("cpu")
    torch.testing.assert_close(m(torch.ones(1, 3)), ref)


def test_device_mismatch_raises_pytorch_error():
    d = lazyxla.device()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device=d) + torch.ones(3)
    # CPU 0-dim tensors mix with device tensors, as PyTorch allows
    out = torch.ones(3, device=d) * torch.tensor(2.0)
    torch.testing.assert_close(out.cpu(), torch.full((3,), 2.0))


@pytest.mark.parametrize("join", [lambda ts: torch.stack(ts), lambda ts: torch.cat([t[None] for t in ts])])
@pytest.mark.parametrize("cpu_first", [False, True])
def test_a_0d_cpu_tensor_is_not_joined_with_device_tensors(join, cpu_first):
    """A 0-d CPU tensor is a number to arithmetic, not to cat or stack (eager CUDA raises)."""
    ts = [torch.tensor(1.0, device="lazyxla"), torch.tensor(2.0)]
    with pytest.raises(RuntimeError, match="^Expected all tensors to be on the same device, but "
                                           "found at least two devices, lazyxla:0 and cpu!$"):
        join(ts[::-1] if cpu_first else ts)


def test_failed_op_corrupts_nothing():
    d = lazyxla.device()
    a = torch.ones(2, 3, device=d)
    with pytest.raises(RuntimeError):
        a + torch.ones(4, 5, device=d)
    with pytest.raises(RuntimeError):
        a.add_(torch.ones(2, 3, 4, device=d))  # in-place result would need a bigger shape
    lazyxla.sync()
    torch.testing.assert_close(a.cpu(), torch.ones(2, 3))


def test_in_place_casting_rules_match_eager():
    x = torch.zeros(3, dtype=torch.int64, device=lazyxla.device())
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        x.mul_(2.5)
    y = torch.zeros(3, device=lazyxla.device())
    y.add_(torch.ones(3, dtype=torch.int64, device=lazyxla.device()))  # int into float is fine
    assert y.cpu().tolist() == [1.0, 1.0, 1.0]
    assert x.cpu().tolist() == [0, 0, 0]


def test_deepcopy_is_an_independent_copy_with_grad_state():
    import copy
    D = lazyxla.device()
    x = torch.tensor([1.0, 2.0]).to(D).requires_grad_()
    x.grad = torch.ones(2).to(D)
    y = copy.deepcopy(x)
    with torch.no_grad():
        y.add_(1)
    assert y.requires_grad and y.device.type == "lazyxla"
    torch.testing.assert_close(x.detach().cpu(), torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(y.detach().cpu(), torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(y.grad.cpu(), torch.ones(2))
    p = copy.deepcopy(torch.nn.Parameter(torch.ones(2).to(D)))
    assert type(p) is torch.nn.Parameter and p.device.type == "lazyxla"


def test_deepcopy_of_a_base_and_its_views_keeps_them_aliased():
    import copy
    out = []
    for dev in ("cpu", lazyxla.device()):
        x = torch.arange(8.0).view(2, 4).to(dev)
        x2, row, col = copy.deepcopy([x, x[1], x.t()[2]])
        x2.mul_(-1)
        out.append((x.cpu(), row.cpu(), col.cpu()))
    for got, expected in zip(out[1], out[0]):
        torch.testing.assert_close(got, expected)


MADE_LIKE = {
    "zeros_like": lambda x, **k: torch.zeros_like(x, **k),
    "empty_like": lambda x, **k: torch.empty_like(x, **k),
    "full_like": lambda x, **k: torch.full_like(x, 7, **k),
    "randn_like": lambda x, **k: torch.randn_like(x, **k),
    "randint_like": lambda x, **k: torch.randint_like(x, 5, **k),
    "new_ones": lambda x, **k: x.new_ones(2, **k),
    "new_full": lambda x, **k: x.new_full((2,), 3, **k),
    "new_empty_strided": lambda x, **k: x.new_empty_strided((2,), (1,), **k),
}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("name", MADE_LIKE)
def test_like_and_new_factories_make_their_result_on_the_device_asked(name, device):
    x = torch.ones(2, 3, device="lazyxla").t()
    expected = MADE_LIKE[name](x.cpu(), device=device)
    got = MADE_LIKE[name](x, device=device)
    assert (got.device.type, got.shape, got.stride(), got.dtype) == \
        (device, expected.shape, expected.stride(), expected.dtype)
    assert MADE_LIKE[name](x).device.type == "lazyxla"


def test_copy_copy_is_a_device_tensor_on_the_same_buffer():
    """As eager's copy.copy: a new tensor object sharing the storage, which is what later saves
    and copies read (it was a CPU tensor on torch.save's cached bytes)."""
    import copy
    import io
    t = torch.arange(3.0, device="lazyxla")
    c = copy.copy(t)
    assert c is not t and c.device == t.device
    c.add_(10)
    assert t.tolist() == [10.0, 11.0, 12.0]
    saved = io.BytesIO()
    torch.save(t, saved)
    saved.seek(0)
    assert torch.load(saved).tolist() == [10.0, 11.0, 12.0]
    assert copy.copy(t[1:]).tolist() == [11.0, 12.0]
    p = torch.nn.Parameter(torch.ones(2, device="lazyxla"))
    assert type(copy.copy(p)) is torch.nn.Parameter


class _Tagged(torch.Tensor):
    pass


def test_as_subclass_is_an_alias_of_the_other_class():
    """torchvision's tv_tensors wrap tensors with as_subclass: an alias, still in the graph."""
    t = torch.arange(3.0, device="lazyxla", requires_grad=True) * 1
    s = t.as_subclass(_Tagged)
    assert type(s) is _Tagged and s._base is t and s.grad_fn is not None
    with torch.no_grad():
        s.add_(1)
    assert t.tolist() == [1.0, 2.0, 3.0]
    (s * 2).sum().backward()


def test_pickle_and_torch_save_round_trip_to_the_device():
    import io
    import pickle
    D = lazyxla.device()
    m = torch.nn.Linear(3, 2).to(D)
    x = torch.arange(6.0).to(D)
    assert pickle.loads(pickle.dumps(x)).device.type == "lazyxla"
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "view": x[2:4]}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["view"].device.type == "lazyxla"
    torch.testing.assert_close(loaded["view"].cpu(), torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(loaded["model"]["weight"].cpu(), m.weight.detach().cpu())
    buf.seek(0)
    assert torch.load(buf, map_location="cpu")["view"].device.type == "cpu"


@pytest.mark.parametrize("make", [
    lambda: torch.ones(2).to("lazyxla:1"),
    lambda: torch.ones(2, device="lazyxla:1"),
    lambda: torch.randn(2, device="lazyxla:2"),
    lambda: torch.ones(2, device="lazyxla").to("lazyxla:1"),
], ids=["to", "factory", "random_factory", "device_to_device"])
def test_a_device_index_other_than_0_is_refused(make):
    """One device: lazyxla:1 silently meant lazyxla:0."""
    with pytest.raises(RuntimeError, match="invalid device index"):
        make()


@pytest.mark.parametrize("make,shape", [(lambda: torch.nn.LazyLinear(4), (2, 7)),
                                        (lambda: torch.nn.LazyConv2d(3, 2), (1, 2, 5, 5)),
                                        (lambda: torch.nn.LazyBatchNorm1d(), (4, 3))])
def test_a_lazy_module_moved_before_its_first_forward_initializes_on_the_device(make, shape):
    """Its uninitialized parameters stay uninitialized (they became plain tensors of size 0)."""
    torch.manual_seed(0)
    m = make().to("lazyxla")
    assert isinstance(m.weight, torch.nn.parameter.UninitializedParameter)
    x = torch.randn(*shape)
    out = m(x.to("lazyxla"))
    assert m.weight.device.type == "lazyxla" and type(m.weight) is torch.nn.Parameter
    torch.testing.assert_close(out.cpu(), m.cpu()(x))
