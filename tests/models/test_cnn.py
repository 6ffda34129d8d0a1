"""A ResNet-style CNN (written here: conv, batch norm, ReLU, residual blocks, pooling, linear) on
32x32 images: forward in lazy mode and under torch.compile matches eager, training matches."""
import copy

import torch
from torch import nn

import lazyxla
from lazyxla import metrics
from _common import D, assert_close, assert_no_fallbacks, check_training, compiles


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class ResNetish(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layers = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2), nn.MaxPool2d(2))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _make():
    torch.manual_seed(0)
    return ResNetish()


def _images(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)


def test_forward_lazy_and_compiled_match_eager():
    model = _make().eval()
    dev_model = copy.deepcopy(model).to(D)
    x, _ = _images(1)
    with torch.no_grad():
        ref = model(x)
        metrics.clear_counters()
        c0 = compiles()
        out = dev_model(x.to(D))
        lazyxla.sync()
        assert compiles() - c0 == 1, "a forward at fixed shapes is one XLA program"
        assert_close(out, ref)
        compiled = torch.compile(dev_model, backend="lazyxla")
        assert_close(compiled(x.to(D)), ref)
        c1 = compiles()
        assert_close(compiled(x.to(D)), ref)
        assert compiles() == c1
    assert_no_fallbacks()


def _ce_loss(model, x, y):
    return nn.functional.cross_entropy(model(x), y)


def test_training_matches_eager_lazy_and_compiled():
    batches = [_images(2)] * 5
    check_training(_make, batches, _ce_loss, compiled=False)
    check_training(_make, batches, _ce_loss, compiled=True)
