"""Parameter matching across TEQL/TLR, DQN, discrete SAC and LoRa-VI.

The formulas of the paper's Appendix "Parameter Matching Methodology", a
matcher that picks the architecture whose count is nearest a budget, and the
appendix table recomputed from the formulas. Run ``python -m analysis.params``
to print it (``--format text|csv|markdown``).

Where the appendix's printed numbers disagree with its own formulas, the table
here shows what the formulas give; ``docs/parameter-matching.md`` lists every
difference.

This module imports nothing from ``rl``, so the command runs without the
environments or PyTorch.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple


def cp_params(rank: int, dims: Sequence[int]) -> int:
    """Return P_CP = R * sum(d_n), the size of a rank-R CP model of a d_1 x ... x d_N tensor.

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_CP.
    """
    return int(rank) * sum(int(d) for d in dims)


def mlp_params(d_in: int, hidden: int | Sequence[int], d_out: int) -> int:
    """Return the weights and biases of a fully connected network.

    With one hidden layer of width h this is P_DQN = d_in h + h + h d_out + d_out;
    ``hidden`` may also be a sequence of widths (one per hidden layer, possibly
    empty for a linear map).

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_DQN.
    """
    widths = [int(hidden)] if isinstance(hidden, int) else [int(h) for h in hidden]
    layers = [int(d_in), *widths, int(d_out)]
    return sum(a * b + b for a, b in zip(layers[:-1], layers[1:], strict=False))


def sac_params(d_in: int, hidden: int | Sequence[int], d_out: int) -> int:
    """Return P_SAC = 3 P_network + 1: actor, two critics of the same shape, one temperature.

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_SAC.
    """
    return 3 * mlp_params(d_in, hidden, d_out) + 1


def cur_params(k: int, n_states: int, n_actions: int) -> int:
    """Return P_CUR = K (|S| + |A| - K), the distinct entries of a K-anchor CUR skeleton.

    The formula is evaluated as written, also for K > min(|S|, |A|) (which no
    skeleton can realise); the appendix does so for Highway (K = 20, |A| = 5).

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_CUR.
    """
    return int(k) * (int(n_states) + int(n_actions) - int(k))


def match_width(
    budget: int,
    param_fn: Callable[[int], int],
    *,
    min_width: int = 1,
    max_width: int = 1_000_000,
) -> int:
    """Return the width whose parameter count is nearest ``budget`` (ties: the smaller width).

    Parameters
    ----------
    budget : int
        Target number of parameters.
    param_fn : callable
        Width -> parameter count; must be non-decreasing in the width (true of
        `mlp_params` and `sac_params` in the hidden width).
    min_width, max_width : int
        Search range.

    Examples
    --------
    >>> match_width(700, lambda h: mlp_params(4, h, 10))
    46
    """
    if budget < 1:
        raise ValueError(f"The 'budget' parameter must be an int >= 1. Got {budget!r} instead.")
    low, high = int(min_width), int(max_width)
    if param_fn(high) < budget:
        return high
    while low < high:  # first width whose count reaches the budget
        mid = (low + high) // 2
        if param_fn(mid) >= budget:
            high = mid
        else:
            low = mid + 1
    if low > min_width and budget - param_fn(low - 1) <= param_fn(low) - budget:
        return low - 1
    return low


def match_cur_k(budget: int, n_states: int, n_actions: int) -> int:
    """Return the anchor count K in [1, min(|S|, |A|)] whose P_CUR is nearest ``budget``.

    Ties go to the smaller K. Note that for CartPole (|S| = 81, |A| = 10,
    budget 700) this gives K = 8 (664), not the appendix's K = 9 (738).
    """
    if budget < 1:
        raise ValueError(f"The 'budget' parameter must be an int >= 1. Got {budget!r} instead.")
    candidates = range(1, min(int(n_states), int(n_actions)) + 1)
    return min(candidates, key=lambda k: (abs(cur_params(k, n_states, n_actions) - budget), k))


class EnvironmentSpec(NamedTuple):
    """The appendix's settings for one environment.

    Attributes
    ----------
    name : str
        Display name (``"CartPole"``).
    rank : int
        CP rank R of TEQL/TLR.
    dims : tuple of int
        CP grid, state modes then action modes.
    d_in, d_out : int
        Network input (state components) and output (discrete actions) sizes.
    cur_k : int
        LoRa-VI anchors K.
    cur_state_bins : tuple of int
        LoRa-VI coarse state grid.
    cur_actions : int
        LoRa-VI |A|.
    cur_feasible : bool
        Whether the appendix runs LoRa-VI on this environment.
    """

    name: str
    rank: int
    dims: tuple[int, ...]
    d_in: int
    d_out: int
    cur_k: int
    cur_state_bins: tuple[int, ...]
    cur_actions: int
    cur_feasible: bool

    @property
    def budget(self) -> int:
        """The CP count, which is the budget the others are matched to."""
        return cp_params(self.rank, self.dims)


ENVIRONMENTS: dict[str, EnvironmentSpec] = {
    "cartpole": EnvironmentSpec("CartPole", 10, (10, 10, 20, 20, 10), 4, 10, 9, (3,) * 4, 10, True),
    "pendulum": EnvironmentSpec("Pendulum", 10, (20, 20, 10), 2, 10, 10, (7, 7), 10, True),
    "highway": EnvironmentSpec("Highway", 20, (20,) * 9 + (5,), 9, 5, 20, (2,) * 9, 5, False),
}
"""Appendix table "Parameter configurations for all environments and methods"."""


def matched_widths() -> dict[tuple[str, str], int]:
    """Return the hidden widths the matcher picks, keyed ``(environment, "dqn" | "sac")``.

    DQN: one hidden layer, count nearest the CP budget. SAC: the common hidden
    width of actor and both critics, 3 P_network + 1 nearest the budget.

    Returns
    -------
    dict
        ``{("cartpole", "dqn"): 46, ("cartpole", "sac"): 15, ("pendulum", "dqn"): 38,
        ("pendulum", "sac"): 12, ("highway", "dqn"): 246, ("highway", "sac"): 82}``.
    """
    widths: dict[tuple[str, str], int] = {}
    for key, env in ENVIRONMENTS.items():
        widths[key, "dqn"] = match_width(
            env.budget, lambda h, e=env: mlp_params(e.d_in, h, e.d_out)
        )
        widths[key, "sac"] = match_width(
            env.budget, lambda h, e=env: sac_params(e.d_in, h, e.d_out)
        )
    return widths


class ParamRow(NamedTuple):
    """One row of the parameter table.

    Attributes
    ----------
    environment, algorithm, architecture : str
    params : int
        The formula's count (for an infeasible LoRa-VI: the count it would need).
    ratio : float
        ``params / budget``.
    feasible : bool
        False where the appendix deems the method infeasible.
    """

    environment: str
    algorithm: str
    architecture: str
    params: int
    ratio: float
    feasible: bool = True


def _dims_text(dims: Sequence[int]) -> str:
    """Write a grid as the appendix does: runs of more than 4 equal sizes as ``20x9``."""
    parts: list[str] = []
    i = 0
    while i < len(dims):
        j = i
        while j < len(dims) and dims[j] == dims[i]:
            j += 1
        run = j - i
        parts.extend([f"{dims[i]}x{run}"] if run > 4 else [str(dims[i])] * run)
        i = j
    return "[" + ",".join(parts) + "]"


def parameter_table() -> list[ParamRow]:
    """Recompute the appendix's parameter table from the formulas.

    Returns
    -------
    list of ParamRow
        Four rows per environment (TEQL/TLR, DQN, SAC, LoRa-VI), CartPole,
        Pendulum, Highway.

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", Table "Parameter
    configurations for all environments and methods".
    """
    widths = matched_widths()
    rows: list[ParamRow] = []
    for key, env in ENVIRONMENTS.items():
        budget = env.budget
        h_dqn, h_sac = widths[key, "dqn"], widths[key, "sac"]
        n_states = math.prod(env.cur_state_bins)
        cur = cur_params(env.cur_k, n_states, env.cur_actions)
        cur_arch = f"K={env.cur_k}, state={_dims_text(env.cur_state_bins)}, |A|={env.cur_actions}"
        if not env.cur_feasible:
            cur_arch = f"infeasible: {cur_arch} needs {cur:,} > {budget:,}"
        entries = [
            ("TEQL/TLR", f"R={env.rank}, dims={_dims_text(env.dims)}", budget, True),
            (
                "DQN",
                f"hidden=[{h_dqn}], in={env.d_in}, out={env.d_out}",
                mlp_params(env.d_in, h_dqn, env.d_out),
                True,
            ),
            (
                "SAC",
                f"hidden=[{h_sac}]x3, in={env.d_in}, out={env.d_out}",
                sac_params(env.d_in, h_sac, env.d_out),
                True,
            ),
            ("LoRa-VI", cur_arch, cur, env.cur_feasible),
        ]
        for algorithm, arch, params, feasible in entries:
            rows.append(ParamRow(env.name, algorithm, arch, params, params / budget, feasible))
    return rows


HEADER = ("Environment", "Algorithm", "Architecture", "Params", "Ratio")


def _cells(row: ParamRow) -> tuple[str, ...]:
    return (
        row.environment,
        row.algorithm,
        row.architecture,
        f"{row.params:,}",
        f"{row.ratio:.2f}x",
    )


def format_table(rows: Sequence[ParamRow], fmt: str = "text") -> str:
    """Render rows as aligned plain text, CSV or a Markdown table.

    Parameters
    ----------
    rows : sequence of ParamRow
    fmt : {"text", "csv", "markdown"}
    """
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*HEADER, "Feasible"])
        for row in rows:
            writer.writerow([*row[:3], row.params, f"{row.ratio:.4f}", row.feasible])
        return buffer.getvalue()
    cells = [HEADER, *(_cells(r) for r in rows)]
    if fmt == "markdown":
        lines = ["| " + " | ".join(x.replace("|", "\\|") for x in c) + " |" for c in cells]
        lines.insert(1, "|" + "|".join(["---"] * 3 + ["---:"] * 2) + "|")
        return "\n".join(lines) + "\n"
    if fmt != "text":
        raise ValueError(
            f"The 'fmt' parameter must be one of 'text', 'csv', 'markdown'. Got {fmt!r} instead."
        )
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    right = {3, 4}
    lines = [
        "  ".join(
            c[i].rjust(w) if i in right else c[i].ljust(w) for i, w in enumerate(widths)
        ).rstrip()
        for c in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the parameter table (``python -m analysis.params [--format ...]``)."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.params",
        description="Print the TEQL paper's parameter table, recomputed from its formulas.",
    )
    parser.add_argument("--format", choices=("text", "csv", "markdown"), default="text")
    args = parser.parse_args(argv)
    sys.stdout.write(format_table(parameter_table(), args.format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
