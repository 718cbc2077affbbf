"""Lowerings of ONNX ops, one module per op family; importing this package registers them."""
from . import elementwise, nn, shape  # noqa: F401
