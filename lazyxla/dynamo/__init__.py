"""torch.compile backend "lazyxla": the dynamo bridge over the lazy runtime."""
