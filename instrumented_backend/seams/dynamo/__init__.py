"""Dynamo: tracing the user's frames into FX graphs, and what torch.compile wraps."""
