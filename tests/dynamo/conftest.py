import pytest
import torch


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
