"""TorchScript and torch.export archives with lazyxla tensors: what PyTorch's C++ serializers and
tracer cannot do with a Python device loads, saves or raises saying what to do instead."""
import io

import pytest
import torch
import torch.nn as nn

import lazyxla  # noqa: F401

D = "lazyxla"


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(3, 4, bias=False)
        self.register_buffer("shift", torch.ones(3))

    def forward(self, x):
        return self.b(self.a(x) + self.shift)


def _archive(module) -> io.BytesIO:
    f = io.BytesIO()
    torch.jit.save(module, f)
    f.seek(0)
    return f


@pytest.mark.parametrize("location", ["lazyxla", "lazyxla:0", torch.device("lazyxla")])
def test_a_torchscript_archive_loads_onto_the_device(location):
    torch.manual_seed(0)
    net = _Net()
    loaded = torch.jit.load(_archive(torch.jit.script(net)), map_location=location)
    assert {t.device.type for t in [*loaded.parameters(), *loaded.buffers()]} == {"lazyxla"}
    x = torch.randn(2, 4)
    out = loaded(x.to(D))
    torch.testing.assert_close(out.cpu(), net(x))
    out.sum().backward()
    assert loaded.a.weight.grad.device.type == "lazyxla"


def test_saving_a_device_module_as_torchscript_raises_instead_of_writing_empty_weights():
    scripted = torch.jit.script(_Net().to(D))
    with pytest.raises(RuntimeError, match="Save the module from the CPU"):
        torch.jit.save(scripted, io.BytesIO())
    loaded = torch.jit.load(_archive(scripted.cpu()), map_location=D)  # the remedy it names
    assert loaded.a.weight.device.type == "lazyxla"


def test_tracing_device_tensors_raises_and_a_cpu_trace_moves_to_the_device():
    with pytest.raises(RuntimeError, match="Trace on the CPU"):
        torch.jit.trace(lambda a: a + torch.tensor([1.0, 2.0], device=a.device),
                        (torch.ones(3, 2, device=D),))
    with pytest.raises(RuntimeError, match="Trace on the CPU"):
        torch.jit.trace(nn.Linear(4, 3).to(D), torch.ones(2, 4))
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    traced = torch.jit.trace(lin, torch.ones(2, 4)).to(D)
    x = torch.randn(2, 4)
    torch.testing.assert_close(traced(x.to(D)).cpu(), lin(x))


def test_torch_export_save_and_load_of_device_weights():
    """torch.export's packager tells a whole weight from a slice by comparing the tensor's and
    its storage's data_ptr(): a lazyxla tensor's is its storage's plus its offset's bytes."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 3).to(D)
    ep = torch.export.export(lin, (torch.randn(2, 4, device=D),))
    f = io.BytesIO()
    torch.export.save(ep, f)
    f.seek(0)
    back = torch.export.load(f)
    x = torch.randn(2, 4, device=D)
    torch.testing.assert_close(back.module()(x).cpu(), lin(x).cpu())


def test_a_tensors_data_ptr_is_its_storages_plus_its_offset():
    x = torch.arange(6.0, device=D)
    assert x.data_ptr() == x.untyped_storage().data_ptr()
    assert x[2:].data_ptr() == x.data_ptr() + 2 * x.element_size()
    assert torch.arange(3.0, device=D).data_ptr() != x.data_ptr()
