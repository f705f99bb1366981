"""Parameter matching across TEQL/TLR, DQN, discrete SAC and LoRa-VI.

The formulas of the paper's Appendix "Parameter Matching Methodology", a
matcher that picks the architecture whose count is nearest a budget, and the
appendix table recomputed from the formulas. Run ``python -m analysis.params``
to print it (``--format text|csv|markdown``).

Where the appendix's printed numbers disagree with its own formulas, the table
here shows what the formulas give; ``docs/parameter-matching.md`` lists every
difference.

The formulas and the matcher live in `rl.agents.param_formulas` (one copy, shared
with the presets and the PyTorch agents) and are re-exported here; neither
module needs PyTorch.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from collections.abc import Sequence
from typing import NamedTuple

from rl.agents.param_formulas import (
    cp_params,
    cur_params,
    match_cur_k,
    match_width,
    mlp_params,
    sac_params,
)
from tensorq.version import add_version_option

__all__ = [
    "ENVIRONMENTS",
    "EnvironmentSpec",
    "ParamRow",
    "cp_params",
    "cur_params",
    "format_table",
    "match_cur_k",
    "match_width",
    "matched_widths",
    "mlp_params",
    "parameter_table",
    "sac_params",
]


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


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.params``."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.params",
        description="Print the TEQL paper's parameter table, recomputed from its formulas.",
    )
    parser.add_argument(
        "--format",
        choices=("text", "csv", "markdown"),
        default="text",
        help="how to print the table (default %(default)s)",
    )
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the parameter table (``python -m analysis.params [--format ...]``)."""
    args = build_parser().parse_args(argv)
    sys.stdout.write(format_table(parameter_table(), args.format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
