"""Examples: a small GPT (gpt.py) and the demo that trains it with torch.compile(backend="lazyxla")
(demo.py, run by `make demo` / `python -m lazyxla.cli demo`)."""
