import pytest

import lazyxla


@pytest.fixture
def dev():
    return lazyxla.device()


@pytest.fixture
def fresh_metrics():
    lazyxla.metrics.clear_all()
    yield lazyxla.metrics
