import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla.testing import check, check_grad

torch.manual_seed(0)
R = torch.randn
REDS = ["none", "mean", "sum"]


@pytest.mark.parametrize("red", REDS)
def test_nll_loss(red):
    x = R(5, 4).log_softmax(-1)
    t = torch.tensor([0, 3, 1, 3, 2])
    w = torch.rand(4)
    check(lambda x, t, w: F.nll_loss(x, t, w, ignore_index=3, reduction=red), x, t, w)
    check_grad(lambda x, t: F.nll_loss(x, t, reduction=red), x, t)
    check_grad(lambda x, t, w: F.nll_loss(x, t, w[0], ignore_index=1, reduction=red), x, t, [w])


def test_nll_loss_1d_and_2d():
    check_grad(lambda x, t: F.nll_loss(x, t), R(4), torch.tensor(2))
    x, t = R(2, 3, 2, 4), torch.randint(0, 3, (2, 2, 4))
    t[0, 0, 0] = -100
    check(lambda x, t: F.nll_loss(x, t), x, t)
    check_grad(lambda x, t, w: F.nll_loss(x, t, w[0], reduction="sum"), x, t, [torch.rand(3)])


def test_nll_loss_takes_byte_targets_as_eager():
    # eager's nll_loss takes Long or Byte class targets (PyTorch's meta kernel refused bytes);
    # the spatial kernel takes Long only
    x, t = R(3, 4), torch.tensor([0, 2, 3], dtype=torch.uint8)
    check(lambda x, t: (F.nll_loss(x, t), F.cross_entropy(x, t, reduction="none"),
                        F.nll_loss(x, t, ignore_index=2), F.nll_loss(x[0], t[0])), x, t)
    check_grad(lambda x, t: F.cross_entropy(x, t), x, t)
    import lazyxla
    d = lazyxla.device()
    x4, t4 = R(2, 3, 2, 2), torch.zeros(2, 2, 2, dtype=torch.uint8)
    for dev in ("cpu", d):
        with pytest.raises(RuntimeError, match="^expected scalar type Long but found Byte$"):
            F.nll_loss(x4.to(dev), t4.to(dev))


@pytest.mark.parametrize("red", REDS)
def test_nll_loss_with_every_target_ignored(red):
    # mean: the loss is 0 / 0 = NaN, but the gradient stays 0 (it was 0 * (1 / 0) = NaN); ignored
    # elements' losses and gradients are +0
    x, t = R(2, 3), torch.tensor([1, 1])
    for shape in ((2, 3), (2, 3, 1)):
        check(lambda x, t: F.nll_loss(x, t, ignore_index=1, reduction=red), x.reshape(shape), t.reshape(shape[:1] + shape[2:]))
        check_grad(lambda x, t: F.nll_loss(x, t, ignore_index=1, reduction=red), x.reshape(shape),
                   t.reshape(shape[:1] + shape[2:]))


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.2), dict(ignore_index=1, reduction="sum"),
                                dict(weight="w", label_smoothing=0.1)])
def test_cross_entropy(kw):
    kw = dict(kw)
    w = [torch.rand(4)] if kw.pop("weight", None) else [None]
    x, t = R(5, 4), torch.tensor([0, 3, 1, 1, 2])
    # weight + label_smoothing + mean: PyTorch's composite calls masked_select (data-dependent
    # shape), which runs on the CPU.
    fallback = w[0] is not None and kw.get("label_smoothing") and kw.get("reduction", "mean") == "mean"
    check(lambda x, t, w: F.cross_entropy(x, t, w[0], **kw), x, t, w, allow_fallback=bool(fallback))
    check_grad(lambda x, t, w: F.cross_entropy(x, t, w[0], **kw), x, t, w)


def test_cross_entropy_probabilities_and_spatial():
    x, p = R(5, 4), R(5, 4).softmax(-1)
    check(lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1), x, p)
    check_grad(lambda x, p: F.cross_entropy(x, p), x, p)
    check_grad(lambda x, t: F.cross_entropy(x, t), R(2, 3, 4), torch.randint(0, 3, (2, 4)))


@pytest.mark.parametrize("red", REDS)
def test_regression_losses(red):
    x, y = R(3, 4), R(3, 4)
    for f in (lambda a, b: F.mse_loss(a, b, reduction=red),
              lambda a, b: F.smooth_l1_loss(a, b, reduction=red, beta=0.5),
              lambda a, b: F.smooth_l1_loss(a, b, reduction=red, beta=0.0),
              lambda a, b: F.huber_loss(a, b, reduction=red, delta=0.7),
              lambda a, b: F.l1_loss(a, b, reduction=red)):
        check(f, x, y)
        check_grad(f, x, y)


@pytest.mark.parametrize("red", REDS)
def test_binary_cross_entropy(red):
    x, y, w = torch.rand(3, 4).clamp(0.05, 0.95), torch.rand(3, 4), torch.rand(3, 4)
    check(lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction=red), x, y, w)
    check_grad(lambda x, y: F.binary_cross_entropy(x, y, reduction=red), x, y)
    lg, pw = R(3, 4) * 3, torch.rand(4) + 0.5
    check(lambda x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw, reduction=red), lg, y, pw)
    check_grad(lambda x, y, w: F.binary_cross_entropy_with_logits(x, y, w[0], reduction=red), lg, y, [w])


def test_bce_clamps_log():
    x = torch.tensor([0.0, 1.0, 0.5])
    y = torch.tensor([1.0, 0.0, 0.5])
    check(lambda x, y: F.binary_cross_entropy(x, y, reduction="none"), x, y)


def test_kl_div_and_soft_margin():
    x, y = R(3, 4).log_softmax(-1), R(3, 4).softmax(-1)
    check_grad(lambda x, y: F.kl_div(x, y, reduction="batchmean"), x, y)
    check(lambda x, y: F.kl_div(x, y, reduction="batchmean"), x, y)
    s = torch.tensor([[1.0, -1, 1, -1]]).expand(3, 4)
    check(lambda x, s: F.soft_margin_loss(x, s), R(3, 4), s)
    check_grad(lambda x, s: F.soft_margin_loss(x, s[0], reduction="sum"), R(3, 4), [s])


def _grad_native(fn, *args):
    """check_grad, asserting that no op (backward included) fell back to the CPU."""
    from lazyxla import metrics
    before = set(metrics.executed_fallback_ops())
    check_grad(fn, *args)
    assert not set(metrics.executed_fallback_ops()) - before


@pytest.mark.parametrize("kw", [{}, dict(p=2, margin=0.7), dict(reduction="sum"), dict(reduction="none")])
def test_multi_margin_loss(kw):
    x, t = R(4, 5), torch.tensor([0, 3, 4, 1])
    check(lambda a, b: F.multi_margin_loss(a, b, **kw), x, t)
    _grad_native(lambda a, b: F.multi_margin_loss(a, b, **kw), x, t)


def test_multi_margin_loss_weight_and_small_inputs():
    x, t = R(4, 5), torch.tensor([0, 3, 4, 1])
    check(lambda a, b, w: F.multi_margin_loss(a, b, weight=w), x, t, torch.rand(5))
    # 1-d and 0-d inputs: the CPU gives a 0-d loss for reduction='none' (the meta kernel (1,))
    check(lambda a, b: F.multi_margin_loss(a, b, reduction="none"), R(5), torch.tensor(2))
    check(lambda a, b: F.multi_margin_loss(a, b), R(()), torch.tensor(0))


@pytest.mark.parametrize("red", REDS)
def test_multilabel_margin_loss(red):
    x = R(4, 5)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 2, 2, 2], [0, 1, 2, 3, 4], [-1, 0, 0, 0, 0]])
    check(lambda a, b: F.multilabel_margin_loss(a, b, reduction=red), x, t)
    _grad_native(lambda a, b: F.multilabel_margin_loss(a, b, reduction=red), x, t)
    check(lambda a, b: F.multilabel_margin_loss(a, b, reduction=red), R(5), t[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
def test_binary_cross_entropy_backward_is_eagers_kernel_bit_for_bit(dtype, reduction):
    """grad * (x - y) / max((1 - x) * x, EPSILON) in the dtype (a float16 / bfloat16 one rounds
    every op; EPSILON is the float 1e-12), then * weight and / numel: lazyxla's other order gave
    about 40% of the elements an ulp or more off in every dtype, and a mean's (a / b) / n was
    folded by XLA into a / (b * n)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(1000, generator=g) * 0.98 + 0.01).to(dtype)
    x[:3] = torch.tensor([0.0, 1.0, 0.5])
    y, w = torch.rand(1000, generator=g).to(dtype), torch.rand(1000, generator=g).to(dtype)
    gy = (torch.randn(1000 if reduction == 0 else (), generator=g) * 3).to(dtype)
    check(lambda gy, x, y, w: (torch.ops.aten.binary_cross_entropy_backward(gy, x, y, None, reduction),
                               torch.ops.aten.binary_cross_entropy_backward(gy, x, y, w, reduction)),
          gy, x, y, w, atol=0, rtol=0)


@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("shape", [(8, 4), (3, 5, 2), (5,)])
def test_cross_entropy_with_a_weight_and_label_smoothing_stays_on_the_device(shape, ignore_index):
    """PyTorch's composite sums the targets' weights with masked_select there (a device read and
    a CPU fallback mid-step); lazyxla's takes the masked gather PyTorch takes for subclasses."""
    torch.manual_seed(0)
    classes = shape[0] if len(shape) == 1 else shape[1]
    x = torch.randn(*shape, dtype=torch.float64)
    target = torch.randint(0, classes, shape[:1] + shape[2:] if len(shape) > 1 else ())
    weight = torch.rand(classes, dtype=torch.float64)

    def loss(x, t, w):
        return F.cross_entropy(x, t, weight=w, label_smoothing=0.1, ignore_index=ignore_index)
    xc = x.clone().requires_grad_()
    expected = loss(xc, target, weight)
    expected.backward()
    xd = x.to("lazyxla").requires_grad_()
    lazyxla.metrics.clear_counters()
    got = loss(xd, target.to("lazyxla"), weight.to("lazyxla"))
    got.backward()
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), equal_nan=True)  # all ignored
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, equal_nan=True)
    assert lazyxla.metrics.executed_fallback_ops() == []
