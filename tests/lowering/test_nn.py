import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics
from lazyxla.testing import check, check_grad, to_cpu

torch.manual_seed(0)
R = torch.randn


def _module_check(mod, *inputs, atol=1e-5, rtol=1e-4, train=True):
    """Forward + backward of a module on CPU and lazyxla: outputs, input and parameter grads,
    and buffers (running stats) agree; nothing falls back to the CPU."""
    dev = lazyxla.device()
    cpu_mod = copy.deepcopy(mod).train(train)
    lx_mod = copy.deepcopy(mod).to(dev).train(train)
    xs = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    lxs = [x.detach().to(dev).requires_grad_(x.is_floating_point()) for x in inputs]
    out = cpu_mod(*xs)
    before = metrics.executed_fallback_ops()
    lout = lx_mod(*lxs)
    (out.float() * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    (lout.float() * torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(dev)).sum().backward()
    torch.testing.assert_close(to_cpu(lout), out.detach(), atol=atol, rtol=rtol)
    for a, b in zip(lxs, xs):
        if b.grad is not None:
            torch.testing.assert_close(to_cpu(a.grad), b.grad, atol=atol, rtol=rtol)
    for (n, p), (_, lp) in zip(cpu_mod.named_parameters(), lx_mod.named_parameters()):
        torch.testing.assert_close(to_cpu(lp.grad), p.grad, atol=atol, rtol=rtol, msg=n)
    for (n, b), (_, lb) in zip(cpu_mod.named_buffers(), lx_mod.named_buffers()):
        torch.testing.assert_close(to_cpu(lb), b, atol=atol, rtol=rtol, msg=n)
    new = sorted(set(metrics.executed_fallback_ops()) - set(before))
    assert not new, f"ops fell back to the CPU: {new}"


# ---------------------------------------------------------------- convolution

@pytest.mark.parametrize("kw", [
    dict(),
    dict(stride=2, padding=1),
    dict(padding=(1, 2), dilation=2),
    dict(groups=2),
])
def test_conv2d(kw):
    w = R(4, 4 // kw.get("groups", 1), 3, 3)
    check(lambda x, w, b: F.conv2d(x, w, b, **kw), R(2, 4, 7, 6), w, R(4), atol=1e-5, rtol=1e-4)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, **kw), R(2, 4, 7, 6), w, R(4), atol=1e-5, rtol=1e-4)


def test_conv1d_3d_nobias():
    check(lambda x, w: F.conv1d(x, w, stride=2, padding=1), R(2, 3, 9), R(4, 3, 3), atol=1e-5, rtol=1e-4)
    check_grad(lambda x, w: F.conv3d(x, w, padding=1), R(1, 2, 4, 4, 3), R(3, 2, 3, 3, 3),
               atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=2, groups=2, dilation=2),
])
def test_conv_transpose2d(kw):
    g = kw.get("groups", 1)
    w = R(4, 6 // g, 3, 3)
    check(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), R(2, 4, 5, 4), w, R(6), atol=1e-5, rtol=1e-4)
    check_grad(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), R(2, 4, 5, 4), w, R(6),
               atol=1e-5, rtol=1e-4)


def test_conv_transpose1d():
    check_grad(lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=1, output_padding=2),
               R(2, 3, 5), R(3, 2, 4), atol=1e-5, rtol=1e-4)


def test_conv2d_module():
    _module_check(nn.Conv2d(3, 4, 3, padding=1), R(2, 3, 5, 5))


# ---------------------------------------------------------------- pooling

@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
])
def test_max_pool2d(kw):
    x = R(2, 3, 7, 8)
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), x)
    check_grad(lambda x: F.max_pool2d(x, **kw), x)


def test_max_pool1d_3d():
    check(lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True), R(2, 3, 9))
    check(lambda x: F.max_pool3d(x, 2, return_indices=True), R(1, 2, 4, 4, 5))
    check_grad(lambda x: F.max_pool3d(x, 2, ceil_mode=True), R(1, 2, 4, 5, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_max_pool_indices_follow_eagers_scan(dtype):
    """The first largest value's index, but the last NaN's; a window of -inf (or of the smallest
    int) gives its first valid position, not a padded one."""
    nan, inf = float("nan"), float("inf")
    if dtype == torch.float32:
        x = torch.tensor([[[[nan, 1., nan, 2., 7.], [-inf, -inf, 7., 3., nan], [0., 7., 1., 1., 2.],
                            [-inf, -inf, -inf, -inf, 4.]]]])
    else:
        low = torch.iinfo(dtype).min
        x = torch.tensor([[[[low, low, 5, 5, 1], [2, 5, low, 0, 5], [low, low, low, 3, 3],
                            [1, 1, 1, low, low]]]], dtype=dtype)
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
               dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True),
               dict(kernel_size=2, stride=1, dilation=2), dict(kernel_size=(1, 5), padding=(0, 2))):
        check(lambda t: F.max_pool2d(t, return_indices=True, **kw), x)
    check(lambda t: F.max_pool1d(t, 3, 1, 1, return_indices=True), x[0])
    check(lambda t: F.max_pool3d(t, (1, 2, 2), return_indices=True), x[None])


def test_max_unpool_round_trips_max_pool():
    x = R(2, 3, 4, 6)
    check(lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), x)
    check(lambda x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2, output_size=[7]),
          R(2, 3, 7))
    check(lambda x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2), R(1, 2, 4, 4, 2))
    check_grad(lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), x)


def test_max_unpool_index_outside_its_plane_is_an_error_not_another_channel():
    """An index is a position within its own (batch, channel) plane. The decomposition wrote an
    index past the plane into the next channel's plane silently; eager raises."""
    x, i = torch.tensor([[[[1.0, 2.0]], [[3.0, 4.0]]]]), torch.tensor([[[[0, 9]], [[1, 2]]]])
    with pytest.raises(RuntimeError, match="invalid max index"):
        F.max_unpool2d(x, i, 2)
    with pytest.raises(RuntimeError, match="invalid max index"):
        F.max_unpool2d(x.to(lazyxla.device()), i.to(lazyxla.device()), 2).cpu()


def test_max_pool_ties_pick_first():
    x = torch.zeros(1, 1, 4, 4)
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), x)


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=1, padding=1, divisor_override=5),
])
def test_avg_pool2d(kw):
    x = R(2, 3, 7, 6)
    check(lambda x: F.avg_pool2d(x, **kw), x)
    check_grad(lambda x: F.avg_pool2d(x, **kw), x)


def test_avg_pool1d_3d():
    check(lambda x: F.avg_pool1d(x, 3, 2, 1), R(2, 3, 9))
    check_grad(lambda x: F.avg_pool3d(x, 2, padding=1, count_include_pad=False), R(1, 2, 4, 4, 3))


@pytest.mark.parametrize("size", [(3, 2), (5, 4), 1])
def test_adaptive_avg_pool2d(size):
    x = R(2, 3, 7, 5)
    check(lambda x: F.adaptive_avg_pool2d(x, size), x)
    check_grad(lambda x: F.adaptive_avg_pool2d(x, size), x)


def test_adaptive_max_pool2d():
    x = R(2, 3, 7, 5)
    check(lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), x)
    check_grad(lambda x: F.adaptive_max_pool2d(x, (3, 4)), x)


def test_adaptive_avg_pool3d():
    check_grad(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), R(1, 2, 5, 4, 3))


def test_pool_modules():
    _module_check(nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2, padding=1)), R(2, 3, 8, 8))


# ---------------------------------------------------------------- normalization

def test_batch_norm_module_train_updates_running_stats():
    m = nn.BatchNorm2d(3, momentum=0.3)
    _module_check(m, R(4, 3, 5, 5) * 2 + 1, atol=1e-5, rtol=1e-4)


def test_batch_norm_module_eval():
    m = nn.BatchNorm2d(3)
    m.running_mean.normal_()
    m.running_var.uniform_(0.5, 2)
    _module_check(m, R(2, 3, 4, 4), train=False)


def test_batch_norm1d_no_affine_no_stats():
    _module_check(nn.BatchNorm1d(4, affine=False, track_running_stats=False), R(5, 4, 3))
    _module_check(nn.BatchNorm1d(4, momentum=None), R(6, 4))


def test_batch_norm_functional():
    check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), R(4, 3, 2), R(3), R(3))
    check_grad(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), R(4, 3, 2), R(3), R(3),
               atol=1e-5, rtol=1e-4)


def test_layer_norm():
    check(lambda x, w, b: F.layer_norm(x, (3, 4), w, b), R(2, 3, 4), R(3, 4), R(3, 4))
    check_grad(lambda x, w, b: F.layer_norm(x, (4,), w, b), R(2, 3, 4), R(4), R(4), atol=1e-5, rtol=1e-4)
    check_grad(lambda x: F.layer_norm(x, (4,)), R(2, 3, 4), atol=1e-5, rtol=1e-4)
    _module_check(nn.LayerNorm(5), R(3, 5))


def test_group_norm():
    check(lambda x, w, b: F.group_norm(x, 2, w, b), R(2, 4, 3, 3), R(4), R(4))
    check(lambda x, w, b: F.group_norm(x, 1, w, b), R(0, 2), R(2), R(2))  # an empty batch
    check_grad(lambda x, w, b: F.group_norm(x, 2, w, b), R(2, 4, 3, 3), R(4), R(4), atol=1e-5, rtol=1e-4)
    _module_check(nn.GroupNorm(3, 6), R(2, 6, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape, dim", [((6, 4, 5), 0), ((6, 4, 5), 2), ((3, 7), 1)])
def test_weight_norm_forward_and_backward(shape, dim, dtype):
    """The fused first- or last-dim kernel (wav2vec2's positional convolution): weight, norms
    (float32 for bfloat16) and both gradients as eager's CPU kernel gives them, none on the CPU."""
    v = R(*shape, dtype=torch.float64).to(dtype)
    g = R(*[n if i == dim else 1 for i, n in enumerate(shape)], dtype=torch.float64).to(dtype)
    check(lambda v, g: torch._weight_norm_interface(v, g, dim), v, g)
    check_grad(lambda v, g: torch._weight_norm(v, g, dim), v, g)


def test_weight_norm_parametrization_trains_without_fallback():
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 6, 3), name="weight", dim=2)
    metrics.clear_all()
    _module_check(conv, R(2, 4, 9))
    assert metrics.executed_fallback_ops() == []


@pytest.mark.parametrize("dtypes, dim", [((torch.float64, torch.float32), 1),
                                         ((torch.bfloat16, torch.float32), 0),
                                         ((torch.float32, torch.float32), -1)])
def test_weight_norm_errors_match_eager(dtypes, dim):
    v, g = R(4, 3, dtype=dtypes[0]), R(1, 3, dtype=dtypes[1])
    with pytest.raises(RuntimeError) as eager:
        torch._weight_norm_interface(v, g, dim)
    dev = lazyxla.device()
    with pytest.raises(RuntimeError) as ours:
        torch._weight_norm_interface(v.to(dev), g.to(dev), dim)
    assert str(eager.value).endswith(str(ours.value))  # (eager's INTERNAL ASSERT adds its location)


# ---------------------------------------------------------------- embedding

def test_embedding():
    idx = torch.tensor([[1, 2, 0], [3, 1, 1]])
    check(lambda w, i: F.embedding(i, w), R(4, 3), idx)
    check_grad(lambda w, i: F.embedding(i, w, padding_idx=1), R(4, 3), idx)
    check_grad(lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), R(4, 3), idx)
    _module_check(nn.Embedding(5, 3, padding_idx=0), torch.tensor([0, 4, 2, 4]))


# ---------------------------------------------------------------- upsampling

@pytest.mark.parametrize("kw", [
    dict(scale_factor=2, mode="nearest"),
    dict(size=(5, 7), mode="nearest"),
    dict(size=(5, 7), mode="nearest-exact"),
    dict(scale_factor=2, mode="bilinear"),
    dict(size=(5, 2), mode="bilinear", align_corners=True),
    dict(scale_factor=1.7, mode="bilinear"),
])
def test_interpolate(kw):
    x = R(1, 2, 3, 4)
    check(lambda x: F.interpolate(x, **kw), x)
    check_grad(lambda x: F.interpolate(x, **kw), x)


# ---------------------------------------------------------------- attention

@pytest.mark.parametrize("kind", ["plain", "causal", "float_mask", "bool_mask"])
def test_sdpa(kind):
    q, k, v = R(1, 2, 3, 4), R(1, 2, 5, 4), R(1, 2, 5, 4)
    if kind == "causal":
        k, v = R(1, 2, 3, 4), R(1, 2, 3, 4)
    mask = {"float_mask": R(3, 5), "bool_mask": torch.rand(3, 5) > 0.3}.get(kind)

    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kind == "causal")
    check(f, q, k, v, mask, atol=1e-5, rtol=1e-4)
    check_grad(f, q, k, v, mask, atol=1e-5, rtol=1e-4)


def test_small_cnn_training_step():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    _module_check(model, R(3, 2, 8, 8), atol=1e-4, rtol=1e-4)


def _grad_native(fn, *args):
    """check_grad, asserting that no op (backward included) fell back to the CPU."""
    before = set(metrics.executed_fallback_ops())
    check_grad(fn, *args)
    assert not set(metrics.executed_fallback_ops()) - before


_X1, _X2, _X3 = torch.randn(2, 3, 5), torch.randn(2, 3, 5, 6), torch.randn(1, 2, 3, 4, 5)


@pytest.mark.parametrize("x,kw", [
    (_X1, dict(size=8, mode="nearest")), (_X1, dict(scale_factor=1.7, mode="nearest-exact")),
    (_X1, dict(size=3, mode="linear")), (_X1, dict(size=7, mode="linear", align_corners=True)),
    (_X3, dict(size=(4, 5, 7), mode="nearest")), (_X3, dict(scale_factor=1.5, mode="nearest-exact")),
    (_X3, dict(size=(5, 3, 6), mode="trilinear")),
    (_X3, dict(size=(5, 3, 6), mode="trilinear", align_corners=True)),
    (_X2, dict(size=(7, 4), mode="bicubic")), (_X2, dict(size=(3, 9), mode="bicubic", align_corners=True)),
    (_X2, dict(size=(3, 9), mode="bilinear", antialias=True)),
    (_X2, dict(scale_factor=0.6, mode="bilinear", antialias=True, align_corners=True)),
    (_X2, dict(size=(2, 3), mode="bicubic", antialias=True)),
    (_X2, dict(size=(9, 12), mode="bicubic", antialias=True)),
], ids=lambda v: str(v.get("mode")) + str(v.get("antialias", "")) if isinstance(v, dict) else "")
def test_upsample_modes(x, kw):
    check(lambda a: F.interpolate(a, **kw), x)
    _grad_native(lambda a: F.interpolate(a, **kw), x)


def test_batch_norm_eval_saves_no_stats():
    x, w, b, rm, rv = torch.randn(3, 2, 4), torch.rand(2), torch.rand(2), torch.rand(2), torch.rand(2) + 0.5
    check(lambda *a: torch.ops.aten.native_batch_norm(*a, False, 0.1, 1e-5), x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._native_batch_norm_legit(*a, False, 0.1, 1e-5), x, w, b, rm, rv)


def test_batch_norm_with_update():
    x, w, b = torch.randn(3, 2, 4), torch.rand(2), torch.rand(2)
    rm, rv = torch.rand(2), torch.rand(2) + 0.5
    d = lazyxla.device()
    rm_d, rv_d = rm.to(d), rv.to(d)
    exp = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.3, 1e-5)
    got = torch.ops.aten._batch_norm_with_update(x.to(d), w.to(d), b.to(d), rm_d, rv_d, 0.3, 1e-5)
    torch.testing.assert_close(to_cpu(got), exp)
    torch.testing.assert_close(rm_d.cpu(), rm)
    torch.testing.assert_close(rv_d.cpu(), rv)


def test_batch_norm_with_update_grad():
    def f(x, w, b):
        rm, rv = torch.zeros(2, device=x.device), torch.ones(2, device=x.device)
        return torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.3, 1e-5)[0]
    _grad_native(f, torch.randn(3, 2, 4), torch.rand(2), torch.rand(2))
