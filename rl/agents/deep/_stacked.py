"""Networks, Adam and replay of B replicas stacked along a leading replica axis.

Every tensor here has the replicas on axis 0, so that one call computes all of
them: a network is a list of four tensors (weights and biases of both layers),
applied with batched matrix products (`torch.baddbmm`), one matrix product per
replica, and differentiated by `backward`, backpropagation written out (no
autograd); Adam keeps its moments stacked the same way and a step count per
replica; the replay memory is one (B, capacity, ...) tensor per field.

A computation may involve only some replicas (`Rows`): they are gathered,
computed and written back, and the others are not touched. Each replica's
numbers are then computed by the same kernels on the same shapes whichever
other replicas take part, which on the CPU with one torch thread makes them
bitwise independent of them (tested in ``tests/rl/test_deep_replicas.py``).
With several threads PyTorch's batched products of one replica and of
several take different kernels, so the agents compute on one thread
whatever the caller set (`rl.agents.deep._torch_utils.one_cpu_thread`).

Random numbers come only from the replicas' numpy streams: weights from
``init`` at construction, replay indices from ``explore``.

On the CPU the agents' compiled engine trains with `rl.agents.deep._step_compiled`
instead, on numpy views of these same tensors (`rl.agents.deep.engine`); the
computations here are the GPU's and the reference those kernels are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray

from rl.agents._restore import check_values, saved_array, saved_count
from rl.agents.deep._replica_draws import uniforms

MLP_KEYS = ("0.weight", "0.bias", "2.weight", "2.bias")
"""Names of a network's tensors in a checkpoint, as ``nn.Sequential`` gives them."""


class Rows(NamedTuple):
    """Replicas taking part in a computation.

    Attributes
    ----------
    host : ndarray of int64
        Their indices, increasing.
    index : torch.Tensor or None
        The same indices on the device, or None when every replica takes part
        (then the stacked tensors are used whole, without gathering).
    """

    host: NDArray[np.int64]
    index: torch.Tensor | None


def rows_of(host: NDArray[np.integer], replicas: int, device: torch.device) -> Rows:
    """Return the `Rows` of the increasing replica indices ``host``."""
    host = np.asarray(host, dtype=np.int64)
    if len(host) == replicas:
        return Rows(host, None)
    return Rows(host, torch.from_numpy(host).to(device))


def take(tensor: torch.Tensor, rows: Rows) -> torch.Tensor:
    """Return the rows of ``tensor`` of the replicas in ``rows`` (the tensor itself for all).

    ``index_select``, not ``tensor[index]``: the same rows, four to five times
    faster on the CPU (90 rows of (100, 470) float32: 6 against 27 microseconds).
    """
    return tensor if rows.index is None else tensor.index_select(0, rows.index)


def put(tensor: torch.Tensor, rows: Rows, values: torch.Tensor) -> None:
    """Write ``values`` into the rows of ``tensor`` of the replicas in ``rows``."""
    if rows.index is None:
        tensor.copy_(values)
    else:
        tensor[rows.index] = values


# ----------------------------------------------------------------------------- networks


class Layout:
    """Where each tensor of one replica lies in its row of a flat (B, P) parameter tensor.

    All of a network's (or an optimizer's) parameters are one row per
    replica, so that Adam, Polyak averaging and target copies are one
    operation each.

    Parameters
    ----------
    shapes : sequence of tuple of int
        One replica's tensors in order, as a checkpoint holds them (a bias flat).
    """

    def __init__(self, shapes: Sequence[tuple[int, ...]]) -> None:
        self.shapes = [tuple(int(n) for n in shape) for shape in shapes]
        self.sizes = [math.prod(shape) for shape in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int).tolist()
        self.size = self.offsets[-1]

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Return the tensors (R, *shape) that are views of the rows of ``flat`` (R, P)."""
        return [
            flat[:, start : start + size].view(-1, *shape)
            for start, size, shape in zip(self.offsets, self.sizes, self.shapes, strict=False)
        ]

    def split(self, row: NDArray[Any]) -> list[NDArray[Any]]:
        """Return one replica's tensors (copies) from its row ``row`` (P,)."""
        return [
            row[start : start + size].reshape(shape).copy()
            for start, size, shape in zip(self.offsets, self.sizes, self.shapes, strict=False)
        ]

    def __add__(self, other: Layout) -> Layout:
        return Layout([*self.shapes, *other.shapes])


def mlp_layout(n_in: int, hidden: int, n_out: int) -> Layout:
    """Return the `Layout` of one network, tensors in `MLP_KEYS` order."""
    return Layout([(hidden, n_in), (hidden,), (n_out, hidden), (n_out,)])


def init_mlp(n_in: int, hidden: int, n_out: int, rng: np.random.Generator) -> NDArray[np.float32]:
    """Return one replica's network row (`mlp_layout`), float32, weights drawn from ``rng``.

    Weights and biases are uniform on [-1/sqrt(fan_in), 1/sqrt(fan_in)],
    PyTorch's default ``nn.Linear`` initialisation, drawn from ``rng`` layer by
    layer, weight (fan_out, fan_in) then bias, so torch's global generator is
    never used.
    """
    drawn = []
    for fan_in, fan_out in ((n_in, hidden), (hidden, n_out)):
        bound = 1.0 / math.sqrt(fan_in)
        drawn.append(rng.uniform(-bound, bound, size=fan_out * fan_in))
        drawn.append(rng.uniform(-bound, bound, size=fan_out))
    return np.concatenate(drawn).astype(np.float32)


class Pass(NamedTuple):
    """One forward pass of R stacked networks, kept for `backward`.

    Samples lie on the last axis ("column layout"): PyTorch's CPU batched
    products are several times faster for these small layers written as
    W (h, n_in) @ X (n_in, N) than as X (N, n_in) @ W^T (at R = 100, N = 32,
    h = 46, |A| = 10: 60 against 290 microseconds for the output layer).
    """

    inputs: torch.Tensor
    """(R, n_in, N)."""
    hidden: torch.Tensor
    """(R, h, N), after the ReLU."""
    outputs: torch.Tensor
    """(R, n_out, N)."""


def forward_pass(params: Sequence[torch.Tensor], inputs: torch.Tensor) -> Pass:
    """Run R stacked networks at ``inputs`` (R, n_in, N), column layout; return the `Pass`.

    ``params`` are the views W1 (R, h, n_in), b1 (R, h), W2 (R, n_out, h),
    b2 (R, n_out) of `mlp_layout`; one matrix product per replica and layer
    (`torch.baddbmm`).
    """
    w1, b1, w2, b2 = params
    hidden = torch.baddbmm(b1[:, :, None], w1, inputs).relu_()  # in place: no second tensor
    return Pass(inputs, hidden, torch.baddbmm(b2[:, :, None], w2, hidden))


def forward(params: Sequence[torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
    """Return the outputs (R, N, n_out) of R stacked networks at inputs (R, N, n_in).

    `forward_pass` on the transposed inputs; a view of its outputs.
    """
    return forward_pass(params, inputs.transpose(1, 2)).outputs.transpose(1, 2)


def backward(params: Sequence[torch.Tensor], done: Pass, d_outputs: torch.Tensor) -> torch.Tensor:
    """Return the gradient (R, P), in `mlp_layout` order, of a loss through the pass ``done``.

    ``d_outputs`` (R, n_out, N), in the column layout of ``done.outputs``, is
    the loss's gradient with respect to the outputs (each replica's loss its
    own, so each row of the result is that replica's gradient).
    Backpropagation through Linear, ReLU, Linear written out, four batched
    products and two sums (autograd's engine costs more than the arithmetic
    at these sizes); the ReLU passes gradient where its output is positive,
    as autograd's does. Tested against autograd.
    """
    _, _, w2, _ = params
    # zero where the ReLU cut (hidden <= 0): the op autograd's ReLU backward runs
    d_hidden = torch.ops.aten.threshold_backward(
        torch.bmm(w2.transpose(1, 2), d_outputs), done.hidden, 0
    )
    parts = (
        # X dH^T, transposed: three times faster than dH X^T at these shapes
        torch.bmm(done.inputs, d_hidden.transpose(1, 2)).transpose(1, 2),
        d_hidden.sum(dim=2),
        torch.bmm(d_outputs, done.hidden.transpose(1, 2)),
        d_outputs.sum(dim=2),
    )
    return torch.cat([part.reshape(len(part), -1) for part in parts], dim=1)


def chosen_outputs(done: Pass, chosen: torch.Tensor) -> torch.Tensor:
    """Return each sample's output at its index ``chosen`` (R, 1, N), shape (R, N)."""
    return done.outputs.gather(1, chosen).squeeze(1)


def backward_chosen(
    params: Sequence[torch.Tensor], done: Pass, chosen: torch.Tensor, d_values: torch.Tensor
) -> torch.Tensor:
    """Return `backward` of a loss that reads only `chosen_outputs`, of gradient ``d_values``.

    ``d_values`` (R, N) is the loss's gradient with respect to `chosen_outputs`;
    the other outputs get none (a one-hot scatter).
    """
    d_outputs = torch.zeros_like(done.outputs).scatter_(1, chosen, d_values[:, None, :])
    return backward(params, done, d_outputs)


def network_state(layout: Layout, row: NDArray[Any], keys: Sequence[str] = MLP_KEYS) -> dict:
    """Return one replica's network as ``nn.Sequential.state_dict`` names it, from its row."""
    return dict(zip(keys, layout.split(row), strict=True))


def parse_network(
    layout: Layout, state: Mapping[str, Any], where: str, keys: Sequence[str] = MLP_KEYS
) -> NDArray[np.float32]:
    """Check a saved network against ``layout``; return it as a row."""
    parts = [
        saved_array(state, key, np.empty(shape, dtype=np.float32), where=where).ravel()
        for key, shape in zip(keys, layout.shapes, strict=True)
    ]
    return np.concatenate(parts)


def write_row(flat: torch.Tensor, i: int, row: NDArray[Any]) -> None:
    """Write replica i's row of ``flat``."""
    with torch.no_grad():
        flat[i] = torch.from_numpy(np.asarray(row)).to(flat.device)


def host_copy(flat: torch.Tensor) -> NDArray[Any]:
    """Return a numpy copy of ``flat`` (one transfer)."""
    return flat.detach().cpu().numpy()


# ----------------------------------------------------------------------------- Adam


class StackedAdam:
    """Adam over a flat (B, P) parameter tensor, with a step count per replica.

    Adam is elementwise, so one update of the stacked tensor is B separate
    Adam updates as long as each replica's gradient is its own (the losses
    are summed over replicas). Each replica counts its own steps and has its
    own step size, so its bias corrections and its steps are those of a
    replica trained alone. The arithmetic is that of ``torch.optim.Adam``
    (single-tensor form, PyTorch's defaults betas 0.9, 0.999, eps 1e-8).

    Parameters
    ----------
    params : torch.Tensor
        The stacked parameters (B, P), updated in place.
    lr : float or ndarray of float, shape (B,)
        Step size, of every replica or of each.
    layout : Layout
        The tensors of a row, for checkpoints (one Adam state per tensor).

    Attributes
    ----------
    lr : ndarray of float64, shape (B,)
        Each replica's step size (written in place to change it).
    """

    betas = (0.9, 0.999)
    eps = 1e-8

    def __init__(
        self, params: torch.Tensor, lr: float | NDArray[np.floating], layout: Layout
    ) -> None:
        self.params = params
        self.lr = np.broadcast_to(np.asarray(lr, dtype=np.float64), params.shape[:1]).copy()
        self.layout = layout
        self.exp_avg = torch.zeros_like(params)
        self.exp_avg_sq = torch.zeros_like(params)
        self.steps = np.zeros(params.shape[0], dtype=np.int64)

    def advance(self, rows: Rows) -> NDArray[np.float32]:
        """Count a step of the replicas in ``rows``; return their factors (2, R), float32.

        Row 0 is the step size -lr / (1 - beta1^t), row 1 the square root of
        the second bias correction, sqrt(1 - beta2^t), with lr and t each replica's.
        """
        beta1, beta2 = self.betas
        self.steps[rows.host] += 1
        t = self.steps[rows.host].astype(np.float64)
        factors = np.stack([-self.lr[rows.host] / (1.0 - beta1**t), np.sqrt(1.0 - beta2**t)])
        return factors.astype(np.float32)

    def hyperparameters(self) -> NDArray[np.float32]:
        """Return beta1, beta2 and eps, float32, for `rl.agents.deep._step_compiled`."""
        return np.array([*self.betas, self.eps], dtype=np.float32)

    def step(self, grad: torch.Tensor, rows: Rows) -> None:
        """One Adam step of the replicas in ``rows``, whose gradients ``grad`` are (R, P).

        In place when every replica steps; otherwise on gathered rows written back.
        """
        beta1, beta2 = self.betas
        factors = self.advance(rows)
        step_size, bc2_sqrt = torch.from_numpy(factors[:, :, None]).to(grad.device)
        with torch.no_grad():
            m, v, p = (take(x, rows) for x in (self.exp_avg, self.exp_avg_sq, self.params))
            m.lerp_(grad, 1.0 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            # the same denominator as v.sqrt(): where v is below the smallest normal
            # float (zero included), sqrt(v) / bc2_sqrt <= 4e-18 (bc2_sqrt >= sqrt(1 -
            # beta2)) is under half an ulp of eps (4.4e-16), so the sum rounds to eps
            # either way; and PyTorch's CPU sqrt of an exact zero is six times slower
            denom = v.clamp_min(torch.finfo(v.dtype).tiny).sqrt_().div_(bc2_sqrt).add_(self.eps)
            p.addcdiv_(m * step_size, denom)
            if rows.index is not None:
                for x, new in ((self.exp_avg, m), (self.exp_avg_sq, v), (self.params, p)):
                    put(x, rows, new)

    def host_moments(self) -> tuple[NDArray[Any], NDArray[Any]]:
        """Return numpy copies of the two moments, for `replica_state`."""
        return host_copy(self.exp_avg), host_copy(self.exp_avg_sq)

    def replica_state(self, i: int, moments: tuple[NDArray[Any], NDArray[Any]]) -> dict[str, Any]:
        """Return replica i's state as ``torch.optim.Adam.state_dict`` lays it out."""
        state: dict[int, dict[str, Any]] = {}
        if self.steps[i]:
            step = np.array(self.steps[i], dtype=np.float32)
            pairs = zip(
                self.layout.split(moments[0][i]), self.layout.split(moments[1][i]), strict=True
            )
            for k, (m, v) in enumerate(pairs):
                state[k] = {"step": step, "exp_avg": m, "exp_avg_sq": v}
        group = {"lr": float(self.lr[i]), "betas": self.betas, "eps": self.eps}
        return {
            "state": state,
            "param_groups": [{**group, "params": list(range(len(self.layout.shapes)))}],
        }

    def parse(self, saved: Mapping[str, Any], where: str) -> Any:
        """Check one replica's saved state; return (steps, moments rows or None) for `write`.

        A state without entries is that of an optimizer that has not stepped yet.
        """
        entries = saved["state"]
        if not isinstance(entries, Mapping):
            raise ValueError(f"the entry {where}/state must be a mapping.")
        if not entries:
            return 0, None
        first, second, steps = [], [], set()
        for k, shape in enumerate(self.layout.shapes):
            entry = entries[k]
            name = f"{where}/state/{k}"
            step = entry["step"]
            if not isinstance(step, np.ndarray) or step.shape != () or step.dtype != np.float32:
                raise ValueError(f"the entry {name}/step must be a float32 scalar.")
            check_values(f"{name}/step", step, 1, None)
            steps.add(float(step))
            like = np.empty(shape, dtype=np.float32)
            first.append(saved_array(entry, "exp_avg", like, where=name).ravel())
            second.append(saved_array(entry, "exp_avg_sq", like, where=name, low=0.0).ravel())
        if len(steps) != 1 or not float(next(iter(steps))).is_integer():
            raise ValueError(f"the entry {where}/state holds unequal or fractional step counts.")
        return int(next(iter(steps))), (np.concatenate(first), np.concatenate(second))

    def write(self, i: int, parsed: Any) -> None:
        """Set replica i's step count and moments from what `parse` returned."""
        steps, moments = parsed
        self.steps[i] = steps
        if moments is None:
            moments = (np.zeros(self.layout.size, np.float32),) * 2
        write_row(self.exp_avg, i, moments[0])
        write_row(self.exp_avg_sq, i, moments[1])


# ----------------------------------------------------------------------------- replay

BUFFER_FIELDS = ("states", "actions", "rewards", "next_states", "terminated")
#: Integers up to this are exact in float32 (the replay's records).
EXACT_FLOAT32 = 2**24


def field_tails(components: int) -> dict[str, tuple[int, ...]]:
    """Return each replay field's shape per transition: index vectors (D_S,), the others scalars."""
    return {key: (components,) if key.endswith("states") else () for key in BUFFER_FIELDS}


def record_bytes(components: int) -> int:
    """Return the bytes of one `StackedReplay` record (float32 columns) for D_S = ``components``."""
    return 4 * sum(math.prod(tail) for tail in field_tails(components).values())


class Sample(NamedTuple):
    """A mini-batch per replica, tensors of shape (R, batch_size, ...) on the device."""

    states: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_states: torch.Tensor
    terminated: torch.Tensor


class StackedReplay:
    """B ring buffers of transitions: one float32 record per transition, (B, capacity, W).

    A record holds a transition's state index vector, next state index vector,
    joint action, reward and termination flag side by side (W = 2 D_S + 3
    columns, `columns`), so that drawing a mini-batch is one gather of whole
    records, not one per field: at B = 100 the five gathers of separate fields
    cost a DQN step about three times as much, each a cache miss per sample.
    float32 holds every index exactly (modes and joint actions are at most
    2**24); checkpoints keep each field in its own dtype (`dtypes`). Each
    replica has its own write position and size.

    Parameters
    ----------
    replicas : int
        B.
    capacity : int
        Transitions kept per replica; the oldest is overwritten first.
    state_dims : tuple of int
        Mode sizes (choose the saved dtype, bound the saved indices).
    device : torch.device
        Where the records live.
    """

    def __init__(
        self, replicas: int, capacity: int, state_dims: Sequence[int], device: torch.device
    ) -> None:
        self.capacity = int(capacity)
        self.state_dims = tuple(int(d) for d in state_dims)
        if max(self.state_dims) > EXACT_FLOAT32:
            raise ValueError(
                f"The deep agents' replay holds state indices below {EXACT_FLOAT32} "
                f"(float32); a mode has {max(self.state_dims)} values."
            )
        dtype = np.promote_types(np.min_scalar_type(max(self.state_dims) - 1), np.int16)
        self.dtypes = {
            "states": dtype,
            "actions": np.dtype(np.int64),
            "rewards": np.dtype(np.float32),
            "next_states": dtype,
            "terminated": np.dtype(np.float32),
        }
        self.tails = field_tails(len(self.state_dims))
        self.columns: dict[str, slice] = {}
        start = 0
        for key, tail in self.tails.items():
            self.columns[key] = slice(start, start + math.prod(tail))
            start += math.prod(tail)
        # empty: pages are only touched as transitions arrive
        self.records = torch.empty(
            (replicas, self.capacity, start), dtype=torch.float32, device=device
        )
        self.device = device
        #: first columns of states, action, reward, next states and termination
        self.starts = np.array([self.columns[key].start for key in BUFFER_FIELDS], dtype=np.int64)
        self.position = np.zeros(replicas, dtype=np.int64)
        self.size = np.zeros(replicas, dtype=np.int64)

    def add(self, rows: Rows, values: Mapping[str, NDArray[Any]]) -> None:
        """Store one transition per replica in ``rows``; ``values`` maps each field to (R, ...)."""
        r = rows.host
        record = np.empty((len(r), self.records.shape[2]), dtype=np.float32)
        for key, columns in self.columns.items():
            record[:, columns] = np.asarray(values[key]).reshape(
                len(r), columns.stop - columns.start
            )
        index = torch.from_numpy(r * self.capacity + self.position[r]).to(self.device)
        flat = self.records.view(-1, self.records.shape[2])
        flat.index_copy_(0, index, torch.from_numpy(record).to(self.device))
        self.position[r] = (self.position[r] + 1) % self.capacity
        self.size[r] = np.minimum(self.size[r] + 1, self.capacity)

    def draw(self, generators: Any, rows: Rows, batch_size: int) -> NDArray[np.int64]:
        """Draw ``batch_size`` stored transitions per replica uniformly, with replacement.

        Replica i's indices are floor(u * size_i) of ``batch_size`` uniform
        doubles u drawn from its generator (``random``, several times cheaper
        than ``integers``; the bias is below 2**-53 per index); ``generators``
        is the replicas' typed list (`rl.agents.deep._replica_draws.uniforms`).
        Returns the indices (R, batch_size) into each replica's records.
        """
        u = np.empty((len(rows.host), batch_size))
        uniforms(generators, rows.host, u)
        sizes = self.size[rows.host][:, None]
        return np.minimum((u * sizes).astype(np.int64), sizes - 1)

    def sample(self, generators: Any, rows: Rows, batch_size: int) -> Sample:
        """Return the transitions `draw` draws, as (R, batch_size, ...) tensors.

        States float32 (the indices), actions int64, rewards and termination
        flags float32.
        """
        drawn = self.draw(generators, rows, batch_size)
        drawn += (rows.host * self.capacity)[:, None]
        index = torch.from_numpy(drawn.ravel()).to(self.device)
        flat = self.records.view(-1, self.records.shape[2])
        records = flat.index_select(0, index).view(len(rows.host), batch_size, -1)
        fields = {
            key: records[:, :, columns].view(*records.shape[:2], *self.tails[key])
            for key, columns in self.columns.items()
        }
        fields["actions"] = fields["actions"].to(torch.int64)
        return Sample(**fields)

    def replica_state(self, i: int) -> dict[str, Any]:
        """Replica i's stored transitions (filled part only), position and size."""
        n = int(self.size[i])
        records = self.records[i, :n].cpu().numpy()
        state: dict[str, Any] = {
            key: records[:, columns].reshape(n, *self.tails[key]).astype(self.dtypes[key])
            for key, columns in self.columns.items()
        }
        state.update(position=int(self.position[i]), size=n)
        return state

    def parse(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Check one replica's saved buffer; return what `write` needs.

        Raises
        ------
        ValueError
            If the size or position is out of range, an array has another
            shape or dtype than this buffer's, or a state index is outside its mode.
        """
        n = saved_count(state, "size", self.capacity)
        position = saved_count(state, "position", self.capacity - 1)
        parsed: dict[str, Any] = {"size": n, "position": position}
        for key, tail in self.tails.items():
            like = np.empty((n, *tail), dtype=self.dtypes[key])
            parsed[key] = saved_array(state, key, like, where="buffer")
        for key in ("states", "next_states"):
            check_values(f"buffer/{key}", parsed[key], 0, None)
            if n and np.any(parsed[key] >= np.asarray(self.state_dims)):
                raise ValueError(f"the entry buffer/{key} holds an index outside its mode.")
        return parsed

    def write(self, i: int, parsed: Mapping[str, Any]) -> None:
        """Restore replica i from what `parse` returned."""
        n = parsed["size"]
        record = np.empty((n, self.records.shape[2]), dtype=np.float32)
        for key, columns in self.columns.items():
            record[:, columns] = parsed[key].reshape(n, columns.stop - columns.start)
        self.records[i, :n] = torch.from_numpy(record).to(self.device)
        self.position[i] = parsed["position"]
        self.size[i] = n
