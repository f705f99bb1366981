"""Argument checks of `tensorq`, public for the packages built on it (`analysis`).

Each raises ``ValueError`` with one uniform line naming the parameter, for
example "The 'rank' parameter must be an int >= 1. Got 0 instead.".
`as_numpy` converts a tensor of any TensorLy backend to a NumPy array.
"""

from tensorq._validation import as_numpy, check_float, check_int

__all__ = ["as_numpy", "check_float", "check_int"]
