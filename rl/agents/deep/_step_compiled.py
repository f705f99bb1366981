"""DQN's and discrete SAC's training steps and acting compiled for the CPU, replica by replica.

On the CPU the stacked PyTorch step (`rl.agents.deep._stacked`) spends most of its
time outside arithmetic: at B = 100 and the CartPole widths each replica's
products are a few thousand multiply-adds, and the step is dozens of small
kernels, each a pass over the (B, P) tensors and a dispatch. These kernels do
one replica's whole step at a time (replay gather, forward passes, losses,
backpropagation, Adam, in one loop over the replicas that learn), on numpy
views of the agents' own tensors, so the state, the checkpoints and the
random streams are those of the PyTorch step. `outputs` is acting's forward
pass (one state per replica), which costs PyTorch a dozen small kernels too.
The agents' compiled engine (`rl.agents.deep._compiled_engine`) calls them from
the steps' ``compiled`` methods; on a GPU the stacked engine runs the PyTorch
computations, which are also the reference these kernels are tested against
(``tests/rl/test_compiled_steps.py``: the same parameters, moments and
losses up to float32 rounding after many steps).

The arithmetic is that of the PyTorch step, in float32, with other orders
of the sums: each layer's product is one BLAS call (``np.dot``, SciPy's
sgemm), and the loops run over the samples innermost, where the compiler
vectorises them without reassociating any sum. So the results differ from
the PyTorch step's in the last bits. Each replica is computed by the
same code on its own rows whichever others learn with it, so a replica's
numbers do not depend on the others (bitwise).

Parameter rows are laid out as `rl.agents.deep._stacked.mlp_layout`: W1 (h, n_in),
b1 (h,), W2 (n_out, h), b2 (n_out,), row-major, one after the other. Replay
records are `rl.agents.deep._stacked.StackedReplay`'s: states, joint action,
reward, next states, termination flag.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rl.jit import arithmetic_kernel as kernel

HUBER, MSE = 0, 1
"""TD loss codes of `dqn_steps` (`rl.agents.deep._torch_agent.td_loss`'s names)."""

NO_Q = np.empty(0)
"""The steps' ``q_means`` while the mean Q of the taken actions is not asked for."""


@kernel
def _gather(
    records: NDArray[np.float32],
    replica: int,
    drawn: NDArray[np.int64],
    scale: NDArray[np.float32],
    start: int,
    x: NDArray[np.float32],
) -> None:
    """Fill x (D, N) with the scaled index vectors at column ``start`` of the drawn records."""
    for n in range(drawn.shape[0]):
        record = records[replica, drawn[n]]
        for k in range(x.shape[0]):
            x[k, n] = record[start + k] * scale[k]


@kernel
def _column(
    records: NDArray[np.float32], replica: int, drawn: NDArray[np.int64], column: int
) -> NDArray[np.float32]:
    """Return column ``column`` of the drawn records (N,): the action, reward or flag."""
    values = np.empty(drawn.shape[0], np.float32)
    for n in range(drawn.shape[0]):
        values[n] = records[replica, drawn[n], column]
    return values


@kernel
def _offsets(n_in: int, hidden: int, n_out: int) -> tuple[int, int, int]:
    """Return where b1, W2 and b2 start in a network's row (`._stacked.mlp_layout`)."""
    b1 = hidden * n_in
    w2 = b1 + hidden
    return b1, w2, w2 + n_out * hidden


@kernel
def _forward(
    p: NDArray[np.float32],
    x: NDArray[np.float32],
    h: NDArray[np.float32],
    out: NDArray[np.float32],
) -> None:
    """One network (row ``p``) at inputs x (D, N): hidden h (H, N) after the ReLU, outputs (A, N).

    Linear, ReLU, Linear, as `rl.agents.deep._stacked.forward_pass`: each layer's
    product is one BLAS call, then the bias.
    """
    n_in, hidden, n_out, n = x.shape[0], h.shape[0], out.shape[0], x.shape[1]
    b1, w2, b2 = _offsets(n_in, hidden, n_out)
    zero = np.float32(0.0)
    np.dot(p[:b1].reshape(hidden, n_in), x, h)
    for j in range(hidden):
        bias = p[b1 + j]
        for s in range(n):
            value = h[j, s] + bias
            h[j, s] = zero if value < zero else value  # NaN stays NaN, as in torch
    np.dot(p[w2:b2].reshape(n_out, hidden), h, out)
    for a in range(n_out):
        bias = p[b2 + a]
        for s in range(n):
            out[a, s] += bias


@kernel
def _backward(
    p: NDArray[np.float32],
    x: NDArray[np.float32],
    h: NDArray[np.float32],
    d_out: NDArray[np.float32],
    grad: NDArray[np.float32],
    d_h: NDArray[np.float32],
    ones: NDArray[np.float32],
) -> None:
    """Write into ``grad`` (P,) the gradient of a loss through `_forward` of row ``p`` at x.

    ``d_out`` (A, N) is the loss's gradient with respect to the outputs, ``d_h``
    (H, N) working memory, ``ones`` (N,) ones. Backpropagation through Linear,
    ReLU, Linear as `rl.agents.deep._stacked.backward`: its three products and the
    biases' sums over the samples (products with ``ones``) are BLAS calls; the
    ReLU passes gradient where the hidden unit is positive, as autograd's does.
    """
    n_in, hidden, n = x.shape[0], h.shape[0], x.shape[1]
    n_out = d_out.shape[0]
    b1, w2, b2 = _offsets(n_in, hidden, n_out)
    zero = np.float32(0.0)
    np.dot(d_out, h.T, grad[w2:b2].reshape(n_out, hidden))
    np.dot(d_out, ones, grad[b2:])
    np.dot(p[w2:b2].reshape(n_out, hidden).T, d_out, d_h)
    for j in range(hidden):
        for s in range(n):
            if not h[j, s] > zero:
                d_h[j, s] = zero
    np.dot(d_h, ones, grad[b1:w2])
    np.dot(d_h, x.T, grad[:b1].reshape(hidden, n_in))


@kernel
def outputs(
    networks: NDArray[np.float32],
    rows: NDArray[np.int64],
    states: NDArray[np.int64],
    scale: NDArray[np.float32],
    hidden: int,
    out: NDArray[np.float32],
) -> None:
    """Write the outputs (R, A) of replicas rows[r]'s networks at their rows of ``states``.

    ``networks`` (B, P) are the stacked rows, ``states`` (B, D) the index
    vectors, scaled by ``scale`` as `_gather` does: acting's forward pass, one
    sample per replica, with the sums of `_forward` (product, then bias).
    """
    n_in, n_out = scale.shape[0], out.shape[1]
    b1, w2, b2 = _offsets(n_in, hidden, n_out)
    zero = np.float32(0.0)
    x = np.empty(n_in, np.float32)
    h = np.empty(hidden, np.float32)
    for r in range(rows.shape[0]):
        i = rows[r]
        p = networks[i]
        for k in range(n_in):
            x[k] = np.float32(states[i, k]) * scale[k]
        for j in range(hidden):
            total = zero
            for k in range(n_in):
                total += p[j * n_in + k] * x[k]
            total += p[b1 + j]
            h[j] = zero if total < zero else total
        for a in range(n_out):
            total = zero
            for j in range(hidden):
                total += p[w2 + a * hidden + j] * h[j]
            out[r, a] = total + p[b2 + a]


@kernel
def _adam(
    p: NDArray[np.float32],
    m: NDArray[np.float32],
    v: NDArray[np.float32],
    grad: NDArray[np.float32],
    step_size: np.float32,
    bc2_sqrt: np.float32,
    beta1: np.float32,
    beta2: np.float32,
    eps: np.float32,
) -> None:
    """One Adam step of one replica's row, `rl.agents.deep._stacked.StackedAdam.step`'s arithmetic.

    ``step_size`` is -lr / (1 - beta1^t), ``bc2_sqrt`` sqrt(1 - beta2^t).
    """
    one = np.float32(1.0)
    tiny = np.finfo(np.float32).tiny
    for i in range(p.shape[0]):
        g = grad[i]
        m[i] += (one - beta1) * (g - m[i])
        v[i] = v[i] * beta2 + (one - beta2) * g * g
        denom = np.sqrt(max(v[i], tiny)) / bc2_sqrt + eps
        p[i] += m[i] * step_size / denom


@kernel
def _td_targets(
    records: NDArray[np.float32],
    replica: int,
    drawn: NDArray[np.int64],
    columns: NDArray[np.int64],
    next_values: NDArray[np.float32],
    gamma: np.float32,
    targets: NDArray[np.float32],
) -> None:
    """Write r + gamma (1 - terminated) next_values (N,) of the drawn records into ``targets``."""
    rewards = _column(records, replica, drawn, columns[2])
    terminated = _column(records, replica, drawn, columns[4])
    one = np.float32(1.0)
    for s in range(targets.shape[0]):
        targets[s] = rewards[s] + gamma * (one - terminated[s]) * next_values[s]


@kernel
def dqn_steps(
    records: NDArray[np.float32],
    columns: NDArray[np.int64],
    drawn: NDArray[np.int64],
    rows: NDArray[np.int64],
    scale: NDArray[np.float32],
    q: NDArray[np.float32],
    target: NDArray[np.float32],
    exp_avg: NDArray[np.float32],
    exp_avg_sq: NDArray[np.float32],
    factors: NDArray[np.float32],
    adam: NDArray[np.float32],
    gammas: NDArray[np.float32],
    hidden: int,
    n_out: int,
    loss: int,
    losses: NDArray[np.float64],
    watch_q: bool,
    q_means: NDArray[np.float64],
) -> None:
    """One DQN gradient step of each replica rows[r] on its mini-batch drawn[r] (N,); its losses.

    The TD target r + gamma (1 - terminated) max_a' Q_target(s', a'), the loss
    ``loss`` (`HUBER` or `MSE`) of Q(s, a) against it, its gradient written
    out and one Adam step, as `rl.agents.deep.dqn.DQNStep.stacked` does.
    ``columns`` are the record columns of states, action, reward, next states
    and termination; ``factors`` (2, R) Adam's step sizes and bias
    corrections (`rl.agents.deep._stacked.StackedAdam.advance`); ``adam`` holds
    beta1, beta2 and eps, ``gammas`` (B,) each replica's discount factor.
    ``losses[r]`` gets replica rows[r]'s mean loss and,
    when ``watch_q``, ``q_means[r]`` its mean Q(s, a) of the taken actions before the step.
    """
    n_in, n = scale.shape[0], drawn.shape[1]
    beta1, beta2, eps = adam[0], adam[1], adam[2]
    one, half, zero = np.float32(1.0), np.float32(0.5), np.float32(0.0)
    count = np.float32(n)
    x = np.empty((n_in, n), np.float32)
    h = np.empty((hidden, n), np.float32)
    out = np.empty((n_out, n), np.float32)
    best = np.empty(n, np.float32)
    targets = np.empty(n, np.float32)
    d_out = np.empty((n_out, n), np.float32)
    grad = np.empty(q.shape[1], np.float32)
    d_h = np.empty((hidden, n), np.float32)
    ones = np.ones(n, np.float32)
    for r in range(rows.shape[0]):
        i = rows[r]
        own = drawn[r]
        _gather(records, i, own, scale, columns[3], x)
        _forward(target[i], x, h, out)
        best[:] = out[0]
        for a in range(1, n_out):
            for s in range(n):
                value = out[a, s]
                best[s] = value if value > best[s] or np.isnan(value) else best[s]
        _td_targets(records, i, own, columns, best, gammas[i], targets)
        chosen = _column(records, i, own, columns[1])
        _gather(records, i, own, scale, columns[0], x)
        _forward(q[i], x, h, out)
        total = zero
        d_out[:] = zero
        for s in range(n):
            a = np.int64(chosen[s])
            difference = out[a, s] - targets[s]
            size = abs(difference)
            if loss == HUBER:
                total += half * difference * difference if size < one else size - half
                d_out[a, s] = min(max(difference, -one), one) / count
            else:
                total += difference * difference
                d_out[a, s] = np.float32(2.0) * difference / count
        losses[r] = total / count
        if watch_q:
            taken = zero
            for s in range(n):
                taken += out[np.int64(chosen[s]), s]
            q_means[r] = taken / count
        _backward(q[i], x, h, d_out, grad, d_h, ones)
        step_size, bc2_sqrt = factors[0, r], factors[1, r]
        _adam(q[i], exp_avg[i], exp_avg_sq[i], grad, step_size, bc2_sqrt, beta1, beta2, eps)


@kernel
def _policy(
    logits: NDArray[np.float32],
    pi: NDArray[np.float32],
    log_pi: NDArray[np.float32],
    work: NDArray[np.float32],
) -> None:
    """Write the softmax pi (A, N) over the actions of ``logits`` (A, N) and its log, log pi.

    log pi = z - max z - log sum exp(z - max z), pi = exp(z - max z) / sum
    (`rl.agents.deep.sac.log_policy`); ``work`` (2, N) is working memory.
    """
    n_out, n = logits.shape
    top, total = work[0], work[1]
    top[:] = logits[0]
    for a in range(1, n_out):
        for s in range(n):
            top[s] = max(top[s], logits[a, s])
    total[:] = np.float32(0.0)
    for a in range(n_out):
        for s in range(n):
            pi[a, s] = np.exp(logits[a, s] - top[s])
            total[s] += pi[a, s]
    for a in range(n_out):
        for s in range(n):
            pi[a, s] /= total[s]
    for s in range(n):
        total[s] = np.log(total[s])
    for a in range(n_out):
        for s in range(n):
            log_pi[a, s] = logits[a, s] - top[s] - total[s]


@kernel
def _min_critic(
    critics: NDArray[np.float32],
    x: NDArray[np.float32],
    h: NDArray[np.float32],
    first: NDArray[np.float32],
    out: NDArray[np.float32],
) -> None:
    """Write min(Q1, Q2) (A, N) at x of the two critics ``critics`` (2, P)."""
    _forward(critics[0], x, h, first)
    _forward(critics[1], x, h, out)
    for a in range(out.shape[0]):
        for s in range(out.shape[1]):
            out[a, s] = min(first[a, s], out[a, s])


@kernel
def sac_steps(
    records: NDArray[np.float32],
    columns: NDArray[np.int64],
    drawn: NDArray[np.int64],
    rows: NDArray[np.int64],
    scale: NDArray[np.float32],
    actor: NDArray[np.float32],
    critics: NDArray[np.float32],
    critics_target: NDArray[np.float32],
    log_alpha: NDArray[np.float32],
    moments: tuple[NDArray[np.float32], ...],
    factors: NDArray[np.float32],
    adam: NDArray[np.float32],
    settings: NDArray[np.float32],
    hidden: int,
    n_out: int,
    autotune: bool,
    losses: NDArray[np.float64],
    watch_q: bool,
    q_means: NDArray[np.float64],
) -> None:
    """One discrete SAC update of each replica rows[r] on its mini-batch drawn[r] (N,).

    What `rl.agents.deep.sac.SACStep.stacked` does, in its order: the soft
    Bellman targets from the actor and the target critics at the next states,
    an Adam step of both critics on their MSE, an Adam step of the actor on the
    policy loss against the updated critics, one of log alpha on the
    temperature loss when ``autotune``, and the Polyak update of the target
    critics. ``critics`` and ``critics_target`` are (B, 2, P): Q1 and Q2 of
    each replica. ``moments`` holds the first and second moments of the actor,
    critics (B, 2, P) and log alpha, in that order; ``factors`` (3, 2, R) their Adam
    step sizes and bias corrections; ``adam`` beta1, beta2 and eps; ``settings``
    (B, 3) each replica's gamma, tau and target entropy. ``losses`` (3, R) gets
    the critic, actor and temperature losses (the last untouched without
    ``autotune``); when ``watch_q``, ``q_means[r]`` the mean over both critics
    of Q_i(s, a) of the taken actions before the step.

    References
    ----------
    Christodoulou (2019), eqs. (9)-(12).
    """
    n_in, n = scale.shape[0], drawn.shape[1]
    beta1, beta2, eps = adam[0], adam[1], adam[2]
    actor_m, actor_v, critic_m, critic_v, alpha_m, alpha_v = moments
    zero, two = np.float32(0.0), np.float32(2.0)
    count = np.float32(n)
    x = np.empty((n_in, n), np.float32)
    h = np.empty((hidden, n), np.float32)
    second_h = np.empty((hidden, n), np.float32)
    d_h = np.empty((hidden, n), np.float32)
    logits = np.empty((n_out, n), np.float32)
    pi = np.empty((n_out, n), np.float32)
    log_pi = np.empty((n_out, n), np.float32)
    first = np.empty((n_out, n), np.float32)
    second = np.empty((n_out, n), np.float32)
    min_q = np.empty((n_out, n), np.float32)
    d_out = np.empty((2, n_out, n), np.float32)
    work = np.empty((2, n), np.float32)
    per_sample = np.empty(n, np.float32)
    gap = np.empty(n, np.float32)
    targets = np.empty(n, np.float32)
    critic_grad = np.empty(critics.shape[1:], np.float32)
    actor_grad = np.empty(actor.shape[1], np.float32)
    alpha_grad = np.empty(1, np.float32)
    ones = np.ones(n, np.float32)
    for r in range(rows.shape[0]):
        i = rows[r]
        own = drawn[r]
        gamma, tau, target_entropy = settings[i, 0], settings[i, 1], settings[i, 2]
        alpha = np.exp(log_alpha[i, 0])
        # soft Bellman targets at the next states (eqs. 9-10)
        _gather(records, i, own, scale, columns[3], x)
        _forward(actor[i], x, h, logits)
        _policy(logits, pi, log_pi, work)
        _min_critic(critics_target[i], x, h, first, min_q)
        next_v = per_sample
        next_v[:] = zero
        for a in range(n_out):
            for s in range(n):
                next_v[s] += pi[a, s] * (min_q[a, s] - alpha * log_pi[a, s])
        _td_targets(records, i, own, columns, next_v, gamma, targets)
        chosen = _column(records, i, own, columns[1])
        # both critics: MSE against the targets
        _gather(records, i, own, scale, columns[0], x)
        _forward(critics[i, 0], x, h, first)
        _forward(critics[i, 1], x, second_h, second)
        d_out[:] = zero
        first_loss, second_loss = zero, zero
        for s in range(n):
            a = np.int64(chosen[s])
            difference = first[a, s] - targets[s]
            first_loss += difference * difference
            d_out[0, a, s] = two * difference / count
            difference = second[a, s] - targets[s]
            second_loss += difference * difference
            d_out[1, a, s] = two * difference / count
        losses[0, r] = first_loss / count + second_loss / count
        if watch_q:
            taken = zero
            for s in range(n):
                a = np.int64(chosen[s])
                taken += first[a, s] + second[a, s]
            q_means[r] = taken / (two * count)
        _backward(critics[i, 0], x, h, d_out[0], critic_grad[0], d_h, ones)
        _backward(critics[i, 1], x, second_h, d_out[1], critic_grad[1], d_h, ones)
        for c in range(2):
            _adam(
                critics[i, c], critic_m[i, c], critic_v[i, c], critic_grad[c],
                factors[1, 0, r], factors[1, 1, r], beta1, beta2, eps,
            )  # fmt: skip
        # the actor against the updated critics (eq. 12), the temperature's gap (eq. 11)
        _forward(actor[i], x, h, logits)
        _policy(logits, pi, log_pi, work)
        _min_critic(critics[i], x, second_h, first, min_q)
        per_sample[:] = zero
        gap[:] = zero
        for a in range(n_out):
            for s in range(n):
                per_sample[s] += pi[a, s] * (alpha * log_pi[a, s] - min_q[a, s])
                gap[s] += pi[a, s] * (log_pi[a, s] + target_entropy)
        d_logits = d_out[0]
        for a in range(n_out):
            for s in range(n):
                advantage = alpha * log_pi[a, s] - min_q[a, s]
                d_logits[a, s] = pi[a, s] * (advantage - per_sample[s]) / count
        losses[1, r] = per_sample.sum() / count
        _backward(actor[i], x, h, d_logits, actor_grad, d_h, ones)
        _adam(
            actor[i], actor_m[i], actor_v[i], actor_grad,
            factors[0, 0, r], factors[0, 1, r], beta1, beta2, eps,
        )  # fmt: skip
        if autotune:
            # the temperature loss is linear in log alpha
            alpha_grad[0] = -(gap.sum() / count)
            losses[2, r] = log_alpha[i, 0] * alpha_grad[0]
            _adam(
                log_alpha[i], alpha_m[i], alpha_v[i], alpha_grad,
                factors[2, 0, r], factors[2, 1, r], beta1, beta2, eps,
            )  # fmt: skip
        # Polyak averaging of the target critics
        target, online = critics_target[i], critics[i]
        for c in range(2):
            for k in range(target.shape[1]):
                target[c, k] += tau * (online[c, k] - target[c, k])
