"""Plain-loop reference implementations of the tensorq update, one replica at a time.

Written to be read against the paper, not to be fast: scalar loops over modes
and rank, no vectorization. The fast paths in `tensorq` are tested against
these.
"""

import math

import numpy as np


def entry(factors, idx):
    """sum_r prod_n F_n(i_n, r) for 2-D factors (d_n, R)."""
    rank = factors[0].shape[1]
    total = 0.0
    for r in range(rank):
        term = 1.0
        for n, f in enumerate(factors):
            term *= f[idx[n], r]
        total += term
    return total


def others(factors, idx, mode):
    """prod_{m != mode} F_m(i_m, :) as a list over r."""
    rank = factors[0].shape[1]
    out = []
    for r in range(rank):
        term = 1.0
        for m, f in enumerate(factors):
            if m != mode:
                term *= f[idx[m], r]
        out.append(term)
    return out


def clip(value, f_max):
    if f_max is None:
        return value
    return min(max(value, -f_max), f_max)


def paper_update(factors, idx, target, visits, alpha, lam, eps, tol, max_inner, f_max=None):
    """Algorithm 1 literally, on copies of 2-D factors. Returns (factors, before, after, steps)."""
    factors = [f.copy() for f in factors]
    before = entry(factors, idx)
    steps = 0
    for n in range(len(factors)):
        q_prev = before
        for _ in range(max_inner):
            q = entry(factors, idx)
            g = others(factors, idx, n)
            dl_dq = -(target - q) - 2 * lam * q / (visits + eps)
            for r in range(len(g)):
                new = factors[n][idx[n], r] - alpha * dl_dq * g[r]
                factors[n][idx[n], r] = clip(new, f_max)
            steps += 1
            q_curr = entry(factors, idx)
            if abs(q_curr - q_prev) < tol:
                break
            q_prev = q_curr
    return factors, before, entry(factors, idx), steps


def released_update(factors, idx, target, visits, alpha, lam, eps, tol, max_inner, f_max=None):
    """The authors' released update (Jacobi sweeps, normalized direction)."""
    factors = [f.copy() for f in factors]
    before = entry(factors, idx)
    q = before
    steps = 0
    for _ in range(max_inner):
        old = [f.copy() for f in factors]
        coefficient = -(target - q) - lam / (visits + eps)
        for n in range(len(factors)):
            g = others(old, idx, n)
            norm = math.sqrt(sum(x * x for x in g))
            if norm == 0:
                continue
            for r in range(len(g)):
                new = old[n][idx[n], r] - alpha * coefficient * g[r] / norm
                factors[n][idx[n], r] = clip(new, f_max)
        steps += len(factors)
        q_new = entry(factors, idx)
        moved = abs(q_new - q)
        q = q_new
        if moved < tol:
            break
    return factors, before, q, steps


def replica(q, b):
    """Copies of replica b's factors as 2-D numpy arrays."""
    return [np.array(f[b]) for f in q.factors]


def tlr_jacobi_update(factors, idx, target, alpha):
    """TLR as released (Rozada et al.): error once, every row moved from the old rows.

    Like the released code: copy the factors, compute each g from the old
    factors, write the moved rows into the copies.
    """
    old = [f.copy() for f in factors]
    factors = [f.copy() for f in factors]
    before = entry(old, idx)
    error = target - before
    for n in range(len(factors)):
        g = others(old, idx, n)  # pre-update rows of every other mode
        norm = math.sqrt(sum(x * x for x in g))
        if norm == 0:
            continue
        for r in range(len(g)):
            factors[n][idx[n], r] = old[n][idx[n], r] + alpha * error * g[r] / norm
    return factors, before, entry(factors, idx), len(factors)


def tlr_gauss_seidel_update(factors, idx, target, alpha):
    """TLR with sequential modes: error once, then each mode in order along g / ||g||."""
    factors = [f.copy() for f in factors]
    before = entry(factors, idx)
    error = target - before
    for n in range(len(factors)):
        g = others(factors, idx, n)  # current rows: earlier modes already moved
        norm = math.sqrt(sum(x * x for x in g))
        if norm == 0:
            continue
        for r in range(len(g)):
            factors[n][idx[n], r] += alpha * error * g[r] / norm
    return factors, before, entry(factors, idx), len(factors)


def stable_update(factors, idx, target, visits, alpha, lam, eps, tol, max_inner, f_max=None):
    """Algorithm 1 with normalized-LMS row steps: row -= eta dL/dQ g / ||g||^2 (Gauss-Seidel)."""
    factors = [f.copy() for f in factors]
    before = entry(factors, idx)
    steps = 0
    for n in range(len(factors)):
        q_prev = before
        g = others(factors, idx, n)
        squares = sum(x * x for x in g)
        for _ in range(max_inner):
            q = entry(factors, idx)
            dl_dq = -(target - q) - 2 * lam * q / (visits + eps)
            for r in range(len(g)):
                move = alpha * dl_dq * g[r] / squares if squares > 0 else 0.0
                factors[n][idx[n], r] = clip(factors[n][idx[n], r] - move, f_max)
            steps += 1
            q_curr = entry(factors, idx)
            if abs(q_curr - q_prev) < tol:
                break
            q_prev = q_curr
    return factors, before, entry(factors, idx), steps
