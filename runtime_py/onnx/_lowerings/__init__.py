"""Lowerings of ONNX ops, one module per op family; importing this package registers them."""
from . import elementwise, nn, shape  # noqa: F401
from . import einsum, norm  # noqa: F401
from . import unary  # noqa: F401
from . import logic, reduce  # noqa: F401
from . import movement, resize  # noqa: F401
from . import control, rnn  # noqa: F401
from . import quant  # noqa: F401
from . import detection  # noqa: F401
from . import attention  # noqa: F401
