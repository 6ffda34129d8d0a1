"""Channels-last values across programs (CPU backend). A compiled program hands back the
activations its channels-last evaluation computed batch-spatial-feature as they are, without a
final transpose (ir/node.py: Node.perm, the layout device data is held in); the program that reads
them next (a training step's backward) takes them so, and so does any lazy program that reads
them. Everything else (host reads, DLPack, the CPU fallback, runtime.graph_inputs) sees the value.
"""
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F
from jax import lax

import lazyxla
from lazyxla.ir import buffer as buf
from lazyxla.ir.node import data_node
from lazyxla.jaxenv import relayout, x64
from lazyxla.runtime import channels_last, executor

D = lazyxla.device()
NHWC = (0, 2, 3, 1)


def _held(t: torch.Tensor, perm=NHWC) -> torch.Tensor:
    """A lazyxla tensor of t's value whose device data is held transposed by perm."""
    with x64(True):
        array = jax.device_put(np.ascontiguousarray(t.numpy().transpose(perm)))
    held = buf.wrap_node(data_node(array, t.dtype, perm))
    assert buf.state_of(held).node.perm == perm and tuple(held.shape) == tuple(t.shape)
    return held


def _specs_run(fn):
    """(fn's result, the GraphSpecs compiled while it ran)."""
    made = []
    compile_spec = executor.compile_spec

    def spy(spec, quick=False):
        made.append(spec)
        return compile_spec(spec, quick)
    executor.compile_spec = spy
    try:
        return fn(), made
    finally:
        executor.compile_spec = compile_spec


def test_the_pass_hands_back_free_outputs_as_it_computed_them():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 3, 6, 5)), jnp.float32)
    w = jnp.asarray(np.random.default_rng(1).standard_normal((4, 3, 3, 3)), jnp.float32)

    def fn(x, w):
        y = jax.nn.relu(lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)]))
        return y, y * 2
    perms: list = []
    with x64(True):
        want = jax.jit(fn)(x, w)
        got = jax.jit(channels_last.channels_last(fn, frozenset({0}), perms))(x, w)
    assert perms == [NHWC, None]  # the free output as computed, the other as its value
    assert got[0].shape == (2, 6, 5, 4) and got[1].shape == want[1].shape
    np.testing.assert_allclose(np.asarray(relayout(got[0], NHWC, None)), np.asarray(want[0]),
                               rtol=2e-6, atol=2e-6)


def test_data_held_transposed_reads_and_computes_as_its_value():
    x = torch.randn(2, 3, 4, 5)
    w = torch.randn(6, 3, 3, 3)
    held = _held(x)
    torch.testing.assert_close(held.cpu(), x)
    torch.testing.assert_close((held * 2 + 1).cpu(), x * 2 + 1)
    torch.testing.assert_close(held[1, :, 2:].cpu(), x[1, :, 2:])
    torch.testing.assert_close(held.permute(0, 2, 3, 1).contiguous().cpu(), x.permute(0, 2, 3, 1))
    torch.testing.assert_close(F.conv2d(held, w.to(D), padding=1).cpu(), F.conv2d(x, w, padding=1),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(np.from_dlpack(held).copy()), x)
    torch.testing.assert_close(torch.nonzero(held > 0).cpu(), torch.nonzero(x > 0))  # CPU fallback
    # a lazy program over it takes it as it is held, and is another program than over the value
    (_, (spec,)) = _specs_run(lambda: (held.exp() + 0.5).cpu())
    assert spec.param_perms == {0: NHWC}
    logical = x.to(D)
    assert lazyxla.graph_hash([held.sin()]) != lazyxla.graph_hash([logical.sin()])
    # the public runtime API feeds it as the program takes it, or as a tensor
    y = held.sin()
    h, ins = lazyxla.graph_hash([y]), lazyxla.graph_inputs([y])
    assert tuple(ins[0].shape) == (2, 4, 5, 3)
    torch.testing.assert_close(lazyxla.run_cached_graph(h, ins)[0].cpu(), x.sin())
    torch.testing.assert_close(lazyxla.run_cached_graph(h, [held])[0].cpu(), x.sin())
    torch.testing.assert_close(lazyxla.run_cached_graph(h, [logical])[0].cpu(), x.sin())
    lazyxla.sync()


def test_a_compiled_function_takes_its_inputs_as_traced_whatever_layout_they_come_in():
    # (2, 4, 4, 4): held channels-last, the array has the value's shape, so only the matcher can
    # tell the two apart
    x, w = torch.randn(2, 4, 4, 4), torch.randn(4, 4, 3, 3)
    wd = w.to(D)

    def f(a):
        return F.conv2d(a, wd, padding=1).relu().sum(dim=(2, 3)) + a[:, :, 0, 0]
    want = F.conv2d(x, w, padding=1).relu().sum(dim=(2, 3)) + x[:, :, 0, 0]
    for first, then in ((_held(x), x.to(D)), (x.to(D), _held(x))):
        torch._dynamo.reset()
        cf = torch.compile(f, backend="lazyxla")
        before = lazyxla.metrics.counter_value("DynamoExtractCompiledGraph") or 0
        with torch.no_grad():
            for arg in (first, then, first):
                torch.testing.assert_close(cf(arg).cpu(), want, rtol=1e-5, atol=1e-5)
        assert lazyxla.metrics.counter_value("DynamoExtractCompiledGraph") == before + 1


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.relu(self.conv2(y) + y)
        return self.fc(y.mean(dim=(2, 3)))


def test_a_compiled_training_step_hands_its_activations_to_the_backward_channels_last():
    torch.manual_seed(0)
    net = _Net()
    ref = _Net()
    ref.load_state_dict(net.state_dict())
    net = net.to(D)
    xs = [torch.randn(4, 3, 8, 8) for _ in range(3)]
    ys = [torch.randint(0, 5, (4,)) for _ in range(3)]
    step = torch.compile(lambda a, b: F.cross_entropy(net(a), b), backend="lazyxla")

    def train():
        out = []
        for x, y in zip(xs, ys):
            loss = step(x.to(D), y.to(D))
            loss.backward()
            out.append((loss.detach().cpu(), [p.grad.cpu() for p in net.parameters()]))
            net.zero_grad()
        return out
    got, specs = _specs_run(train)
    for (loss, grads), x, y in zip(got, xs, ys):
        want = F.cross_entropy(ref(x), y)
        want.backward()
        torch.testing.assert_close(loss, want.detach(), rtol=1e-5, atol=1e-5)
        for g, p in zip(grads, ref.parameters()):
            torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-5)
        ref.zero_grad()
    forward, backward = [s for s in specs if s.free_outputs][:2]
    held_out = executor.CACHE.get(forward.hash).out_perms
    assert held_out is not None and NHWC in held_out  # activations handed on channels-last
    assert NHWC in backward.param_perms.values()  # and taken so
    torch.testing.assert_close(net.bn.running_mean.cpu(), ref.bn.running_mean)
