"""lazyxla benchmark suite: `lazyxla bench [--quick]` (see benchmarks/suite.py)."""
