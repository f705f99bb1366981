"""An online CP tensor holding B independent replicas.

:class:`OnlineCP` stores factor n of every replica in one array of shape
(B, d_n, R), so that one vectorized call reads or updates all replicas (B seeds
trained in lockstep; B = 1 is the single-agent case). It reads entries and
sub-tensors from products of factor rows and never builds the dense tensor
except on request, for small shapes. The update lives in
:func:`tensorq.update.bcd_update`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import tensorly as tl
from tensorly.cp_tensor import CPTensor

from tensorq._backend import (
    ArrayOps,
    array_backend,
    backend_name_of,
    component_sum,
    current_ops,
    device_of,
    ops_for_backend,
)
from tensorq._validation import as_numpy, check_float, check_index, check_int
from tensorq.loss import cp_entry

Array = Any

DEFAULT_MAX_DENSE_SIZE = 10_000_000


class OnlineCP:
    """A rank-R CP tensor of shape (d_1, ..., d_N), held as B replicas.

    Replica b represents Q(i_1, ..., i_N) = sum_r prod_n F_n[b, i_n, r], with
    no weights vector (weights of a CPTensor are absorbed into the first
    factor on construction). The array backend (NumPy, PyTorch or JAX) and
    the device are taken once from the factors, and all methods compute
    there: indices and targets given as NumPy arrays are converted once, and
    arrays of the tensor's backend on its device are used as they are.

    Parameters
    ----------
    factors : sequence of N arrays of shape (B, d_n, R)
        Factor matrices, stacked over replicas, of one backend, dtype and
        device; used without copying.

    Attributes
    ----------
    factors : list of N arrays of shape (B, d_n, R)
        The factor matrices. :func:`tensorq.bcd_update` changes NumPy arrays
        and PyTorch tensors in place; JAX arrays are immutable, so it replaces
        the elements of this list with the updated arrays (read
        ``q.factors`` again after an update rather than keeping a factor).

    See Also
    --------
    OnlineCP.random, OnlineCP.from_cp_tensor : Constructors.
    tensorq.bcd_update : The online update of Algorithm 1.

    References
    ----------
    Section "Low-Rank Tensor Q-Function Update" (the CP representation of Q_t
    and its parameter count R sum_n d_n).

    Examples
    --------
    >>> import numpy as np
    >>> q = OnlineCP.random((3, 4, 2), rank=2, replicas=5, rng=np.random.default_rng(0))
    >>> q
    OnlineCP(shape=(3, 4, 2), rank=2, replicas=5, backend='numpy')
    >>> q.n_params  # R * sum_n d_n per replica
    18
    >>> q.entries(np.zeros((5, 3), dtype=int)).shape  # entry (0, 0, 0) of each replica
    (5,)
    >>> q.subtensor(np.zeros((5, 2), dtype=int)).shape  # state (0, 0), all actions
    (5, 2)
    >>> q.to_cp_tensor(replica=0).shape  # a tensorly CPTensor (a view, no copy)
    (3, 4, 2)
    """

    def __init__(self, factors: Sequence[Array]) -> None:
        if len(factors) == 0:
            raise ValueError("The 'factors' parameter must hold at least one array. Got 0 instead.")
        names = {backend_name_of(f) for f in factors}
        if len(names) > 1:
            raise ValueError(
                f"The 'factors' parameter must hold arrays of one backend. Got {names} instead."
            )
        shapes = [tuple(f.shape) for f in factors]
        if any(len(s) != 3 for s in shapes):
            raise ValueError(
                "The 'factors' parameter must hold arrays of shape (B, d_n, R). "
                f"Got {shapes} instead."
            )
        replicas, _, rank = shapes[0]
        if any(s[0] != replicas or s[2] != rank for s in shapes):
            raise ValueError(
                "The 'factors' parameter must hold arrays with the same replicas B and rank R. "
                f"Got shapes {shapes} instead."
            )
        check_int("replicas", replicas, 1)
        check_int("rank", rank, 1)
        for d in (s[1] for s in shapes):
            check_int("shape", d, 1)
        devices = {str(device_of(f)) for f in factors}
        dtypes = {str(f.dtype) for f in factors}
        if len(devices) > 1 or len(dtypes) > 1:
            raise ValueError(
                "The 'factors' parameter must hold arrays of one device and dtype. "
                f"Got {devices} and {dtypes} instead."
            )
        self.factors = list(factors)
        self._ops: ArrayOps = ops_for_backend(names.pop())
        self._device = device_of(factors[0])
        self._dims = np.array([s[1] for s in shapes])
        self._replica_ids = self._asarray(np.arange(replicas), self._ops.int64)

    @classmethod
    def random(
        cls,
        shape: Sequence[int],
        rank: int,
        replicas: int = 1,
        scale: float = 1.0,
        rng: np.random.Generator | int | None = None,
        *,
        backend: str | None = None,
        device: str | None = None,
    ) -> OnlineCP:
        """Draw factor entries i.i.d. uniform in [0, scale).

        Parameters
        ----------
        shape : sequence of int
            Mode sizes (d_1, ..., d_N), each >= 1.
        rank : int
            CP rank R >= 1.
        replicas : int, default=1
            Number of independent replicas B.
        scale : float, default=1.0
            Upper end of the uniform distribution, > 0.
        rng : numpy.random.Generator or int, optional
            Random source (an int seeds a new Generator). Factors are drawn
            with NumPy in float64, mode by mode, then converted to the
            backend, so every backend starts from the same numbers.
        backend : {"numpy", "pytorch", "jax"}, optional
            Array backend of the factors; TensorLy's current backend if None.
        device : str, optional
            "cpu", "cuda" or "cuda:N" (PyTorch and JAX; NumPy has only
            "cpu"); the backend's default device if None.

        Returns
        -------
        OnlineCP
            float64 factors on ``device``.
        """
        if isinstance(shape, (int, np.integer)) or len(shape) == 0:
            raise ValueError(
                "The 'shape' parameter must be a non-empty sequence of ints. "
                f"Got {shape!r} instead."
            )
        dims = [check_int("shape", d, 1) for d in shape]
        rank = check_int("rank", rank, 1)
        replicas = check_int("replicas", replicas, 1)
        scale = check_float("scale", scale, positive=True)
        rng = np.random.default_rng(rng)
        ops = current_ops() if backend is None else ops_for_backend(backend)
        where = ops.device(device)
        factors = [
            ops.asarray(scale * rng.random((replicas, d, rank)), ops.float64, where) for d in dims
        ]
        return cls(factors)

    @classmethod
    def from_cp_tensor(
        cls, cp: CPTensor | tuple[Array, Sequence[Array]], replicas: int = 1
    ) -> OnlineCP:
        """Copy a CP tensor into every replica.

        Parameters
        ----------
        cp : CPTensor or (weights, factors)
            For example the output of ``tensorly.decomposition.parafac``.
            The weights are multiplied into the first factor.
        replicas : int, default=1
            Number of replicas B; each starts as a copy of ``cp``.

        Returns
        -------
        OnlineCP
            In the backend of ``cp``'s factors.
        """
        replicas = check_int("replicas", replicas, 1)
        weights, factors = cp
        if any(len(f.shape) != 2 for f in factors):
            shapes = [tuple(f.shape) for f in factors]
            raise ValueError(
                f"The 'cp' parameter must hold factors of shape (d_n, R). Got {shapes} instead."
            )
        ops = ops_for_backend(backend_name_of(factors[0]))
        first = factors[0] if weights is None else factors[0] * weights[None, :]
        return cls([ops.stack([f] * replicas) for f in [first, *factors[1:]]])

    @property
    def shape(self) -> tuple[int, ...]:
        """Mode sizes (d_1, ..., d_N)."""
        return tuple(self._dims.tolist())

    @property
    def rank(self) -> int:
        """CP rank R."""
        return int(self.factors[0].shape[2])

    @property
    def replicas(self) -> int:
        """Number of replicas B."""
        return int(self.factors[0].shape[0])

    @property
    def n_params(self) -> int:
        """Parameters per replica, R * sum_n d_n (d_eff in the paper)."""
        return self.rank * int(self._dims.sum())

    @property
    def backend(self) -> str:
        """TensorLy backend name of the factors."""
        return self._ops.name

    @property
    def device(self) -> Any:
        """Device of the factors: a torch.device, a jax.Device, or None for NumPy."""
        return self._device

    def _asarray(self, value: Any, dtype: Any) -> Array:
        """``value`` as an array of the tensor's backend on its device (no copy if already)."""
        return self._ops.asarray(value, dtype, self._device)

    def _owns(self, value: Any) -> bool:
        """Whether ``value`` is an array of the tensor's backend (and not NumPy)."""
        return not self._ops.host and array_backend(value) == self._ops.name

    def _backend_index(self, index: Any, name: str, modes: int) -> Array:
        """Check an index and put it on the tensor's device.

        NumPy input is checked in full (shape, dtype, range). An array of the
        tensor's own backend is checked for shape and dtype only: a range
        check would copy it to the host.
        """
        if self._owns(index):
            expected = (self.replicas, modes)
            if tuple(index.shape) != expected or "int" not in str(index.dtype):
                raise ValueError(
                    f"The {name!r} parameter must be an int array of shape {expected}. "
                    f"Got {index.dtype} array of shape {tuple(index.shape)} instead."
                )
            return self._asarray(index, self._ops.int64)
        idx = check_index(name, index, self._dims[:modes], self.replicas)
        return idx if self._ops.host else self._asarray(idx, self._ops.int64)

    def _rows(self, idx: Array, ids: Array) -> list[Array]:
        """Return copies of the rows F_n[b, idx[b, n], :] of replicas ``ids``."""
        return [f[ids, idx[:, n]] for n, f in enumerate(self.factors)]

    def rows(self, index: Any) -> list[Array]:
        """Return copies of the factor rows of the indexed entries.

        Parameters
        ----------
        index : int array of shape (B, N)
            One entry per replica: NumPy, or the tensor's backend on its
            device (checked for shape and dtype only, not range).

        Returns
        -------
        list of N arrays of shape (B, R)
            ``rows[n][b] = F_n[b, index[b, n], :]``; the input of the pure
            functions of :mod:`tensorq.loss`.
        """
        idx = self._backend_index(index, "index", len(self.factors))
        return self._rows(idx, self._replica_ids)

    def entries(self, index: Any) -> Array:
        """Return one entry per replica.

        Parameters
        ----------
        index : int array of shape (B, N)
            ``index[b]`` is the entry (i_1, ..., i_N) read in replica b; NumPy
            or the tensor's backend, as in :meth:`rows`.

        Returns
        -------
        array of shape (B,)
            sum_r prod_n F_n[b, index[b, n], r].
        """
        if self._ops.functional:  # one compiled gather and product
            return self._subtensor(self._backend_index(index, "index", len(self.factors)))
        return cp_entry(self.rows(index))

    def subtensor(self, leading: Any) -> Array:
        """Return the sub-tensor over the trailing modes for given leading indices.

        With the state modes first and the action modes last, this is a
        state's values over all actions: for one trailing mode of size A it
        is one (A x R) product per replica.

        Parameters
        ----------
        leading : int array of shape (B, k), 0 <= k <= N
            Indices of the first k modes, one row per replica; NumPy or the
            tensor's backend, as in :meth:`rows`.

        Returns
        -------
        array of shape (B, d_{k+1}, ..., d_N)
            ``out[b] = Q_b[leading[b, 0], ..., leading[b, k-1], ...]``; shape
            (B,) when k = N.
        """
        shape = tuple(leading.shape) if self._owns(leading) else as_numpy(leading).shape
        modes = shape[1] if len(shape) == 2 else -1
        if not 0 <= modes <= len(self.factors):
            raise ValueError(
                f"The 'leading' parameter must be an int array of shape ({self.replicas}, k) "
                f"with k <= {len(self.factors)}. Got shape {shape} instead."
            )
        idx = self._backend_index(leading, "leading", modes)
        return self._subtensor(idx)

    def _subtensor(self, idx: Array) -> Array:
        args = (tuple(self.factors), self._replica_ids, idx, self.shape[idx.shape[1] :])
        if self._ops.functional:
            return _jax_subtensor()(*args)
        return _subtensor(*args)

    def to_dense(self, max_size: int = DEFAULT_MAX_DENSE_SIZE) -> Array:
        """Return the dense tensors of all replicas, for small shapes only.

        Parameters
        ----------
        max_size : int, default=10_000_000
            Largest number of entries, B * prod_n d_n, that may be built.

        Returns
        -------
        array of shape (B, d_1, ..., d_N)

        Raises
        ------
        ValueError
            If B * prod_n d_n exceeds ``max_size``.
        """
        max_size = check_int("max_size", max_size, 1)
        size = self.replicas * math.prod(self.shape)
        if size > max_size:
            raise ValueError(
                f"The dense tensor would have {size} entries (replicas x prod(shape)), above "
                f"'max_size'={max_size}. Read entries() or subtensor() instead, or raise max_size."
            )
        no_leading = np.zeros((self.replicas, 0), dtype=np.int64)
        return self._subtensor(self._asarray(no_leading, self._ops.int64))

    def to_cp_tensor(self, replica: int = 0) -> CPTensor:
        """Return one replica as a TensorLy CPTensor whose factors are views.

        Parameters
        ----------
        replica : int, default=0
            Which replica.

        Returns
        -------
        tensorly.cp_tensor.CPTensor
            Weights all ones; factor n is ``self.factors[n][replica]``: a view
            for NumPy and PyTorch, so later updates show through; a copy for
            JAX, whose arrays are immutable.
        """
        check_int("replica", replica, 0)
        if replica >= self.replicas:
            raise ValueError(
                f"The 'replica' parameter must be an int in [0, {self.replicas}). "
                f"Got {replica} instead."
            )
        weights = self._asarray(np.ones(self.rank), self.factors[0].dtype)
        # CPTensor checks its input with TensorLy's current backend: use the factors' own.
        with tl.backend_context(self._ops.name):
            return CPTensor((weights, [f[replica] for f in self.factors]))

    def __repr__(self) -> str:
        device = "" if self._device is None else f", device='{self._device}'"
        return (
            f"OnlineCP(shape={self.shape}, rank={self.rank}, replicas={self.replicas}, "
            f"backend={self._ops.name!r}{device})"
        )


def _subtensor(
    factors: tuple[Array, ...], ids: Array, idx: Array, trailing_shape: tuple[int, ...]
) -> Array:
    """Return ``out[b] = Q_b[idx[b, 0], ..., idx[b, k-1], ...]`` (see `OnlineCP.subtensor`)."""
    modes = idx.shape[1]
    replicas, rank = factors[0].shape[0], factors[0].shape[2]
    weights = None
    for n in range(modes):
        row = factors[n][ids, idx[:, n]]
        weights = row if weights is None else weights * row
    trailing = factors[modes:]
    if not trailing:
        return component_sum(weights)
    # Khatri-Rao product of the leading weights and all trailing factors but
    # the last, shape (B, prod of their sizes, R); then one product with the last.
    left = None if weights is None else weights[:, None, :]
    for factor in trailing[:-1]:
        if left is None:
            left = factor
        else:
            left = (left[:, :, None, :] * factor[:, None, :, :]).reshape(replicas, -1, rank)
    last = trailing[-1]
    if left is None:
        out = component_sum(last)
    elif isinstance(last, np.ndarray):  # components summed in order (`component_sum`)
        out = component_sum(left[:, :, None, :] * last[:, None, :, :])
    else:
        out = left @ last.swapaxes(1, 2)
    return out.reshape((replicas, *trailing_shape))


@cache
def _jax_subtensor() -> Any:
    """Return `_subtensor` compiled by ``jax.jit`` (once per shapes)."""
    import jax

    return jax.jit(_subtensor, static_argnums=3)
