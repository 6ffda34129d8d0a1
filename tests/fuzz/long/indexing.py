"""Advanced indexing, read and written: integer tensors (negative, broadcasting), slices with
steps, None, Ellipsis, boolean masks (a few of the wrong length), scalars; reads, setitem of
scalars and tensors, `+=`, index_put_ with accumulate, writes through the view a basic index
returns. Indices on the CPU or on the device. Values and errors compared with eager's."""
import random

import torch

import lazyxla
from _driver import close, main, outcome

D = lazyxla.device()
DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool]


def _index(r, shape):
    idx, ellipsis, d = [], False, 0
    while d < len(shape):
        k, s = r.random(), shape[d]
        if k < 0.2:
            idx.append(slice(r.choice([None, 0, 1, -1]), r.choice([None, s, -1, 2]), r.choice([None, 1, 2])))
        elif k < 0.4:
            n = r.randint(1, 3)
            ints = torch.tensor([r.randrange(-s, s) for _ in range(n)])
            idx.append(ints.reshape(r.choice([(n,), (n, 1), (1, n)])) if r.random() < 0.3 else ints)
        elif k < 0.5:
            idx.append(r.randrange(-s, s))
        elif k < 0.6:
            idx.append(None)
            continue
        elif k < 0.7 and not ellipsis:
            idx.append(Ellipsis)
            ellipsis = True
            break
        elif k < 0.8:  # (now and then of another length, which eager refuses)
            n = s + (r.choice([-1, 1]) if r.random() < 0.1 and s > 1 else 0)
            idx.append(torch.tensor([r.random() < 0.5 for _ in range(n)]))
        else:
            idx.append(slice(None))
        d += 1
    return tuple(idx[:max(1, len(idx) - 1)] if r.random() < 0.2 else idx)


def _values_for(x, idx, dtype, short_last):
    shape = x[idx].shape
    v = (torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape) - 2).to(dtype)
    return v[..., :1] if short_last and v.dim() and v.shape[-1] else v


def run(seed):
    r = random.Random(seed)
    shape = tuple(r.randint(1, 4) for _ in range(r.randint(1, 3)))
    dtype = r.choice(DTYPES)
    x0 = (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 5).to(dtype)
    idx = _index(r, shape)
    kind = r.choice(["read", "set scalar", "set tensor", "+=", "index_put_ accumulate", "write view"])
    short_last, idx_on_cpu = r.random() < 0.3, r.random() < 0.3
    ints = tuple(i for i in idx if isinstance(i, torch.Tensor) and i.dtype != torch.bool)

    def program(dev):
        x = x0.clone().to(dev)
        ii = tuple(i.to(dev) if isinstance(i, torch.Tensor) and not idx_on_cpu else i for i in idx)
        if kind == "read":
            return x[ii].cpu()
        if kind == "set scalar":
            x[ii] = 3
        elif kind == "set tensor":
            x[ii] = _values_for(x0, idx, dtype, short_last).to(dev)
        elif kind == "+=" and dtype != torch.bool:
            x[ii] += 2
        elif kind == "index_put_ accumulate":
            where = ints if ints else (torch.tensor([0, 0, -1]),)
            shape_v = torch.broadcast_shapes(*[i.shape for i in where]) + x0.shape[len(where):]
            x.index_put_(tuple(i.to(dev) for i in where), torch.ones(shape_v).to(dtype).to(dev), accumulate=True)
        elif kind == "write view":
            v = x[ii]
            v.logical_not_() if dtype == torch.bool else v.add_(1)
            return x.cpu(), v.cpu()
        return x.cpu()

    expected, actual = outcome(lambda: program("cpu")), outcome(lambda: program(D))
    if expected[0] != actual[0] or expected[0] == "error":
        return None if expected[:2] == actual[:2] else (kind, idx, shape, dtype, expected, actual)
    want, got = expected[1], actual[1]
    pairs = zip(want, got) if isinstance(want, tuple) else [(want, got)]
    if not all(close(a, b) for a, b in pairs):
        return (kind, idx, shape, dtype, want, got)
    return None


if __name__ == "__main__":
    raise SystemExit(main(run))
