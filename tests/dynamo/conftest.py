import pytest
import torch


@torch.library.custom_op("lazyxla_test::cpu_only", mutates_args=(), device_types="cpu")
def cpu_only(x: torch.Tensor) -> torch.Tensor:
    """An op XLA cannot lower: it has only a CPU kernel (torch.ops.lazyxla_test.cpu_only), so a
    compiled graph that calls it is partitioned around it."""
    return x.clone() * 3


@cpu_only.register_fake
def _(x):
    return torch.empty_like(x)


@pytest.fixture
def symint_graph():
    """make(fn, x): the FX graph Dynamo makes of fn(x, i) once i has changed (a SymInt
    placeholder), to call a Bridge past Dynamo's guards."""
    def make(fn, x):
        torch._dynamo.reset()
        graphs = []

        def capture(gm, example_inputs):
            graphs.append(gm)
            return gm.forward
        compiled = torch.compile(fn, backend=capture)
        compiled(x, 2)
        compiled(x, 3)
        return graphs[-1]
    return make
