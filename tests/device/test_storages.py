"""Storage-level access to lazyxla tensors answers as eager's storages do (device/storages.py)."""
import copy
import io

import pytest
import torch

import lazyxla

DEV = lazyxla.device()


def pair(t):
    return t, t.to(DEV)


def test_size_is_the_buffers_bytes_for_a_base_and_its_views():
    x, xd = pair(torch.arange(6.0))
    for e, d in ((x, xd), (x[2:], xd[2:]), (x.view(2, 3).t(), xd.view(2, 3).t())):
        s, sd = e.untyped_storage(), d.untyped_storage()
        assert (sd.nbytes(), sd.size(), len(sd)) == (s.nbytes(), s.size(), len(s)) == (24, 24, 24)
    assert xd.storage().size() == 6  # TypedStorage counts elements


def test_identity_is_shared_by_views_and_distinct_between_buffers():
    xd = torch.arange(6.0, device=DEV)
    yd = torch.arange(6.0, device=DEV)
    ptr = xd.untyped_storage().data_ptr()
    assert ptr != 0
    assert xd[2:].untyped_storage().data_ptr() == ptr
    assert xd.view(2, 3).t().untyped_storage().data_ptr() == ptr
    assert yd.untyped_storage().data_ptr() not in (0, ptr)
    assert (xd * 2).untyped_storage().data_ptr() not in (0, ptr)


def test_identity_survives_in_place_writes_and_syncs():
    xd = torch.zeros(4, device=DEV)
    ptr = xd.untyped_storage().data_ptr()
    xd.add_(1)
    xd[1:].mul_(3)
    lazyxla.sync()
    assert xd.untyped_storage().data_ptr() == ptr


@pytest.mark.parametrize("make", [
    lambda dev: torch.arange(6.0, device=dev),
    lambda dev: torch.arange(6.0, device=dev)[1:],
    lambda dev: torch.arange(6.0, device=dev).view(2, 3).t() * 2,   # a result with eager's strides
    lambda dev: torch.tensor([True, False, True], device=dev),
    lambda dev: torch.tensor([-1, 300], dtype=torch.int16, device=dev),
], ids=["base", "view", "strided_result", "bool", "int16"])
def test_reads_give_eagers_bytes_in_memory_order(make):
    e, d = make("cpu"), make(DEV)
    s, sd = e.untyped_storage(), d.untyped_storage()
    assert sd.tolist() == s.tolist()
    assert list(sd) == list(s)
    assert sd.cpu().device.type == "cpu" and sd.cpu().tolist() == s.tolist()
    assert [sd[i] for i in (0, 1, -1)] == [s[i] for i in (0, 1, -1)]
    assert repr(sd) == repr(s).replace("device=cpu", f"device={DEV}")
    assert d.storage().tolist() == e.storage().tolist()
    assert d.storage()[1] == e.storage()[1]


def test_clone_and_deepcopy_are_new_buffers_with_the_same_bytes():
    xd = torch.arange(4.0, device=DEV)
    c = xd.untyped_storage().clone()
    assert c.device == xd.device and c.tolist() == torch.arange(4.0).untyped_storage().tolist()
    assert c.data_ptr() != xd.untyped_storage().data_ptr()
    d = copy.deepcopy(xd.untyped_storage())
    assert d.tolist() == c.tolist()
    xd.add_(1)  # the copies do not follow the original
    assert c.tolist() == d.tolist() == torch.arange(4.0).untyped_storage().tolist()


def test_writes_reach_every_tensor_on_the_buffer():
    x, xd = pair(torch.arange(6.0))
    v, vd = x[3:], xd[3:]
    for s in (x.untyped_storage(), xd.untyped_storage()):
        s[0] = 1
        s[4:8] = 0  # a slice assignment, as eager allows
    torch.testing.assert_close(xd.cpu(), x)
    torch.testing.assert_close(vd.cpu(), v)
    src = torch.full((6,), 7.0)
    x.untyped_storage().copy_(src.untyped_storage())
    vd.untyped_storage().copy_(src.untyped_storage())  # a view's storage is its base's
    torch.testing.assert_close(xd.cpu(), x)
    xd.untyped_storage().fill_(0)
    x.untyped_storage().fill_(0)
    torch.testing.assert_close(xd.cpu(), x)
    # device to device, and device to host
    yd = torch.arange(6.0, device=DEV)
    xd.untyped_storage().copy_(yd.untyped_storage())
    host = torch.zeros(6)
    host.untyped_storage().copy_(xd.untyped_storage())
    torch.testing.assert_close(host, torch.arange(6.0))
    # a TypedStorage source, as eager takes it
    xd.untyped_storage().copy_(torch.full((6,), 3.0).storage())
    host.untyped_storage().copy_(xd.storage())
    torch.testing.assert_close(host, torch.full((6,), 3.0))


def test_bad_writes_raise_eagers_errors():
    xd = torch.arange(6.0, device=DEV)
    with pytest.raises(RuntimeError, match="size does not match, self was 24 bytes but src was 8"):
        xd.untyped_storage().copy_(torch.zeros(2).untyped_storage())
    with pytest.raises(TypeError, match="int types"):
        xd.untyped_storage()[0] = 1.5
    with pytest.raises(RuntimeError, match="cannot be resized"):
        xd.untyped_storage().resize_(0)
    with pytest.raises(NotImplementedError, match="slice a tensor"):
        xd.untyped_storage()[0:4]
    assert xd.untyped_storage().resize_(24).nbytes() == 24  # its own size: nothing to do
    torch.testing.assert_close(xd.cpu(), torch.arange(6.0))


def test_cpu_storages_keep_pytorchs_methods():
    x = torch.arange(6.0)
    s = x.untyped_storage()
    assert s.data_ptr() == x.data_ptr() and s.nbytes() == 24
    assert s.cpu() is s
    assert s[0:4].nbytes() == 4


def test_shared_tensor_detection_by_storage_sees_lazyxla_tensors_as_eager_does():
    """What safetensors and Hugging Face group tensors by: (device, storage pointer, storage size)."""
    def groups(sd):
        by = {}
        for k, v in sd.items():
            by.setdefault((v.device, v.untyped_storage().data_ptr(), v.untyped_storage().nbytes()),
                          set()).add(k)
        return sorted(sorted(g) for g in by.values())
    lin = torch.nn.Linear(4, 4)
    emb = torch.nn.Embedding(4, 4)
    model = torch.nn.ModuleDict({"lin": lin, "emb": emb, "head": torch.nn.Linear(4, 4, bias=False)})
    model["head"].weight = model["emb"].weight  # tied

    def state():
        return {**model.state_dict(), "view": model["lin"].weight[1:]}
    expected = [["emb.weight", "head.weight"], ["lin.bias"], ["lin.weight", "view"]]
    assert groups(state()) == expected
    model.to(DEV)
    assert groups(state()) == expected


def test_torch_save_of_a_storage_round_trips():
    xd = torch.arange(6.0, device=DEV)
    f = io.BytesIO()
    torch.save(xd.untyped_storage(), f)
    f.seek(0)
    loaded = torch.load(f, map_location="cpu", weights_only=True)
    assert loaded.tolist() == torch.arange(6.0).untyped_storage().tolist()


def test_set_to_a_storage_in_another_dtype_reads_its_bytes_in_memory_order():
    e = torch.arange(6.0).view(2, 3).t() * 2  # eager strides (1, 3): memory order differs
    d = torch.arange(6.0, device=DEV).view(2, 3).t() * 2
    want = torch.empty(0, dtype=torch.int32).set_(e.untyped_storage())
    got = torch.empty(0, dtype=torch.int32, device=DEV).set_(d.untyped_storage())
    assert torch.equal(got.cpu(), want)


def test_a_typed_storage_pickles_and_saves_in_the_legacy_format():
    # the C++ writer copied the storage to the host through a storage object without lazyxla's
    # state: AttributeError '_lazyxla'
    import io
    import pickle
    import warnings
    t = torch.arange(6.0, device=lazyxla.device()) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (TypedStorage is deprecated)
        back = pickle.loads(pickle.dumps(t.storage()))
        assert back.device.type == "lazyxla" and back.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        f = io.BytesIO()
        torch.save([t.storage(), t[2:]], f, _use_new_zipfile_serialization=False)
        f.seek(0)
        storage, tail = torch.load(f, weights_only=False)
    assert list(storage) == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0] and tail.cpu().tolist() == [4.0, 6.0, 8.0, 10.0]
