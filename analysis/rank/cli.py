"""``python -m analysis.rank``: rank profile, B_R and spectral energy of a Q-tensor.

::

    python -m analysis.rank --env ENV [--source qstar|run] [--run DIR] [--replica I]
        [--gamma G] [--ranks 1:20] [--center] [--samples K] [--restarts 3] [--no-refine]
        [--seed 0] [--out DIR] [--no-progress]

writes ``rank_profile.csv`` (one row per rank: rel_error, energy = 1 -
rel_error^2, sup_error of the Frobenius-best fit, b_r_upper and b_r_lower
bracketing B_R, mean_abs_error, n_params, energy_about_mean = 1 - ||T -
fit||^2 / ||T - mean T||^2), ``spectral.csv`` (cumulative energy share of
every mode unfolding and of the states x actions matricization, of the
mean-removed tensor with ``--center``), and ``rank_profile.png`` / ``.pdf`` in
``--out``, and prints a summary: the CP energy and the bracket of B_R at the
paper's ranks (10 and 20), the Theorem 1 radius b_r_upper / (1 - gamma), the
unfolding shares at those ranks and the smallest rank reaching 90% energy:
of the energy about the mean with ``--center`` (the headline then), of the CP
energy otherwise, both printed.

Every output file is written atomically and never through a symbolic link: a link
(or anything but a regular file) at an output's name in ``--out`` is refused before
any work starts.

Exit codes: 0 done; 1 an output could not be written (one line on stderr); 2 bad
input, including a rank above `rl.validation.MAX_RANK` or above the largest CP
rank of the tensor's shape and ``--samples`` whose model would not fit in memory
(one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from rl.runs.rundir import RunDirError, atomic_write_bytes, check_run_files
from rl.validation import MAX_RANK
from tensorq.version import add_version_option

ENVS = ("cartpole", "pendulum", "highway", "inventory", "lowrank")
PAPER_RANKS = (10, 20)
"""The ranks of the paper's experiments (CartPole and Pendulum 10, Highway 20)."""
ENERGY_TARGET = 0.9
"""The paper's claim: rank 10 / 20 capture over 90% of the spectral energy."""
OUTPUTS = ("rank_profile.csv", "spectral.csv", "rank_profile.png", "rank_profile.pdf")
"""The files ``python -m analysis.rank`` writes into ``--out``."""


class UsageError(ValueError):
    """Bad command-line input: reported in one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:  # noqa: D102
        self.exit(2, f"{self.prog}: error: {message}\n")


def run_command(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    work: Callable[[argparse.Namespace], list[str]],
) -> int:
    """Parse ``argv``, run ``work`` and print the lines it returns; return the exit code.

    The analysis commands' one way of failing: bad input (`UsageError`) or a
    run file that is a link (`RunDirError`, also one planted while it ran)
    prints one line and returns 2; an ``--out`` that cannot be written prints
    one line and returns 1.
    """
    args = parser.parse_args(argv)
    try:
        lines = work(args)
    except (UsageError, RunDirError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"{parser.prog}: error: cannot write to --out {args.out}: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def parse_ranks(text: str) -> list[int]:
    """Parse ``"1:20"`` (inclusive), ``"1:20:2"`` or ``"5,10,20"`` into ranks in [1, MAX_RANK].

    Raises
    ------
    UsageError
        If the text is not of that form or gives a rank outside [1,
        `rl.validation.MAX_RANK`].
    """
    try:
        parts = [int(p) for p in text.split(":" if ":" in text else ",")]
    except ValueError:
        parts = []
    if not parts or (":" in text and len(parts) not in (2, 3)):
        raise UsageError(f"--ranks must be FIRST:LAST[:STEP] or a comma list, got {text!r}.")
    if max(parts[:2] if ":" in text else parts) > MAX_RANK:  # before a range is listed
        raise UsageError(
            f"--ranks {text!r} goes above {MAX_RANK}, the largest rank fitted "
            "(rl.validation.MAX_RANK)."
        )
    if ":" in text:
        first, last, step = parts[0], parts[1], parts[2] if len(parts) == 3 else 1
        if first > last:
            raise UsageError(
                f"--ranks {text!r} is a reversed range: FIRST must be <= LAST "
                f"(did you mean {last}:{first}?)."
            )
        if step < 1:
            raise UsageError(f"--ranks {text!r} has STEP {step}: it must be >= 1.")
        parts = list(range(first, last + 1, step))
    if min(parts) < 1:
        raise UsageError(f"--ranks must give ranks >= 1, got {text!r}.")
    return sorted(set(parts))


def check_ranks(ranks: Sequence[int], shape: tuple[int, ...]) -> None:
    """Raise `UsageError` if a rank exceeds the largest CP rank a tensor of ``shape`` has.

    Every tensor has CP rank at most the product of its sizes but the largest
    (one rank-1 term per fibre along its longest mode), so a larger rank fits
    nothing more.
    """
    limit = math.prod(shape) // max(shape)
    if max(ranks) > limit:
        raise UsageError(
            f"--ranks goes up to {max(ranks)}, but no tensor of shape {tuple(shape)} has CP rank "
            f"above {limit} (the product of its sizes but the largest); ask for ranks <= {limit}."
        )


def prepare_out(path: str | Path, names: Sequence[str]) -> Path:
    """Create the output directory ``path`` and check that ``names`` can be written in it.

    Raises
    ------
    UsageError
        If ``path`` is not a directory and cannot be made one, or one of ``names``
        in it is a symbolic link or not a regular file (outputs are never written
        through links).
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a file, not a directory; choose another --out.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--out {str(out)!r} cannot be created: {error.strerror}.") from None
    try:
        check_run_files(out, names)
    except RunDirError as error:
        raise UsageError(str(error)) from None
    return out


def write_csv(path: str | Any, columns: dict[str, NDArray]) -> None:
    """Write equal-length columns as a CSV table with a header row.

    The file is replaced atomically and never written through a link
    (`rl.runs.rundir.atomic_write_bytes`, which raises `rl.runs.rundir.RunDirError`).
    """
    names = list(columns)
    data = np.column_stack([np.asarray(columns[name], dtype=np.float64) for name in names])
    integer = [np.issubdtype(np.asarray(columns[name]).dtype, np.integer) for name in names]
    formats = ["%d" if flag else "%.10g" for flag in integer]
    text = io.StringIO()
    np.savetxt(text, data, delimiter=",", header=",".join(names), comments="", fmt=formats)
    atomic_write_bytes(path, text.getvalue().encode("utf-8"))


def check_gamma(gamma: float | None) -> None:
    """Raise `UsageError` unless gamma is None or in (0, 1)."""
    if gamma is not None and not 0.0 < gamma < 1.0:
        raise UsageError(f"--gamma must be in (0, 1), got {gamma!r}.")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.rank``."""
    parser = OneLineParser(
        prog="python -m analysis.rank",
        description="CP rank profile (B_R versus rank) and spectral energy of a Q-tensor.",
    )
    parser.add_argument("--env", required=True, help=f"one of {', '.join(ENVS)}")
    parser.add_argument(
        "--source",
        choices=("qstar", "run"),
        default="qstar",
        help="Q* from the model (default) or the Q of a run directory",
    )
    parser.add_argument("--run", help="run directory (with --source run)")
    parser.add_argument("--replica", type=int, default=0, help="replica of the run (default 0)")
    parser.add_argument(
        "--gamma",
        type=float,
        default=None,
        help="discount in (0, 1); default: 0.9 (exact models), 0.99 (CartPole, "
        "Pendulum), the run's own (--source run)",
    )
    parser.add_argument("--ranks", default="1:20", help="FIRST:LAST inclusive, or a comma list")
    parser.add_argument("--center", action="store_true", help="fit the mean-removed tensor")
    parser.add_argument(
        "--samples", type=int, default=20, help="samples per cell and action of the estimated model"
    )
    parser.add_argument(
        "--restarts", type=int, default=3, help="seeded CP fits per rank (default %(default)s)"
    )
    parser.add_argument(
        "--no-refine",
        action="store_true",
        help="skip the sup-norm refinement of b_r_upper (about half the time on CartPole)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling and fits")
    parser.add_argument("--out", default="rank-out", help="output directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return add_version_option(parser)


def load_tensor(args: argparse.Namespace) -> Any:
    """Return the `analysis.qstar.QTensor` the arguments ask for."""
    from analysis.qstar import q_star, qtensor_from_run

    if args.env not in ENVS:
        raise UsageError(f"unknown --env {args.env!r}; choose one of {', '.join(ENVS)}.")
    if args.source == "qstar":
        if args.env == "highway":
            raise UsageError("Highway has no model to compute Q* from; use --source run --run DIR.")
        if args.samples < 1:
            raise UsageError(f"--samples must be >= 1, got {args.samples}.")
        rng = np.random.default_rng(args.seed)
        try:
            return q_star(args.env, gamma=args.gamma, samples=args.samples, rng=rng)
        except ValueError as error:  # samples whose model cannot fit in memory
            raise UsageError(str(error)) from None
    if not args.run:
        raise UsageError("--source run needs --run DIR.")
    try:
        tensor = qtensor_from_run(args.run, replica=args.replica)
    except (ValueError, KeyError, OSError) as error:
        raise UsageError(str(error).strip().splitlines()[0]) from None
    if tensor.env is not None and tensor.env != args.env:
        raise UsageError(f"the run in {args.run} is on {tensor.env!r}, not --env {args.env!r}.")
    if args.gamma is not None:
        tensor = dataclasses.replace(tensor, gamma=args.gamma)
    return tensor


def unfolding_share(energy: Any, k: int) -> float:
    """Cumulative energy share of the top ``k`` singular values (1 past the last)."""
    energy = np.asarray(energy)
    return float(energy[min(k, len(energy)) - 1])


def centred(tensor: Any) -> Any:
    """Return ``tensor - mean(tensor)``: dense, or for a CPTensor one more CP component."""
    from tensorly.cp_tensor import CPTensor

    from analysis.cp_form import mean_of, minus_constant

    if isinstance(tensor, CPTensor):
        return minus_constant(tensor, mean_of(tensor))
    tensor = np.asarray(tensor, dtype=np.float64)
    return tensor - tensor.mean()


def _squared_norm(tensor: Any) -> float:
    from tensorly.cp_tensor import CPTensor

    from analysis.cp_form import frobenius_norm

    if isinstance(tensor, CPTensor):
        return frobenius_norm(tensor) ** 2
    return float(np.sum(np.asarray(tensor, dtype=np.float64) ** 2))


def with_energy_about_mean(rows: list[dict], tensor: Any) -> list[dict]:
    """Add ``energy_about_mean`` = 1 - ||T - fit||^2 / ||T - mean(T)||^2 to each profile row.

    ``energy`` = 1 - rel_error^2 counts the tensor's constant offset as
    captured energy; this share counts only its variation about the mean.
    ``tensor`` is dense or a CPTensor (the norms then come from its factors).
    """
    total, spread = _squared_norm(tensor), _squared_norm(centred(tensor))
    out = []
    for row in rows:
        residual = row["rel_error"] ** 2 * total
        about = 1.0 - residual / spread if spread > 0 else 1.0
        out.append({**row, "energy_about_mean": about})
    return out


def _row_at(rows: list[dict], rank: int) -> dict | None:
    return next((row for row in rows if row["rank"] == rank), None)


def summary_lines(
    q: Any, rows: list[dict], spectra: Any, seconds: float, centred: bool = False
) -> list[str]:
    """Return the summary: CP energy and B_R at the paper's ranks, the 90% rank, unfoldings.

    The headline 90% rank is of the energy about the mean when ``centred`` (the
    CP energy counts the mean offset as captured), of the CP energy otherwise.
    """
    lines = [q.source, f"shape {q.tensor.shape}, profile in {seconds:.1f} s"]
    for rank in PAPER_RANKS:
        row = _row_at(rows, rank)
        if row is None:
            continue
        line = (
            f"rank {rank}: CP energy {row['energy']:.4f} (rel. error {row['rel_error']:.4f}; "
            f"about the mean {row['energy_about_mean']:.4f}), "
            f"{row['b_r_lower']:.4g} <= B_R <= {row['b_r_upper']:.4g} "
            f"(Frobenius-best fit's sup error {row['sup_error']:.4g})"
        )
        if q.gamma is not None:
            line += f", b_r_upper/(1-gamma) {row['b_r_upper'] / (1 - q.gamma):.4g}"
        shares = [unfolding_share(mode.energy, rank) for mode in spectra.modes]
        line += "; mode-unfolding shares " + ", ".join(f"{s:.3f}" for s in shares)
        if spectra.matricization is not None:
            matrix = unfolding_share(spectra.matricization.energy, rank)
            line += f"; states x actions {matrix:.3f}"
        lines.append(line)
    labels = {"energy": "CP energy", "energy_about_mean": "energy about the mean"}
    found = {key: _smallest_reaching(rows, key) for key in labels}
    headline, other = ("energy_about_mean", "energy") if centred else tuple(labels)
    lines.append(
        f"smallest rank reaching {ENERGY_TARGET:.0%} {labels[headline]}: {found[headline]} "
        f"({labels[other]}: {found[other]})"
    )
    return lines


def _smallest_reaching(rows: list[dict], key: str) -> str:
    reaching = [row["rank"] for row in rows if row[key] >= ENERGY_TARGET]
    return str(min(reaching)) if reaching else f"none up to {max(r['rank'] for r in rows)}"


def run(args: argparse.Namespace) -> list[str]:
    """Do the work of `main` for parsed arguments; return the summary lines."""
    from analysis.rank import plot_rank_profile, rank_profile
    from analysis.spectral import spectral_energy

    check_gamma(args.gamma)
    ranks = parse_ranks(args.ranks)
    if args.restarts < 1:
        raise UsageError(f"--restarts must be >= 1, got {args.restarts}.")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}.")
    out = prepare_out(args.out, OUTPUTS)
    q = load_tensor(args)
    check_ranks(ranks, q.tensor.shape)
    start = time.perf_counter()
    try:
        profile = rank_profile(
            q.tensor,
            ranks,
            restarts=args.restarts,
            center=args.center,
            refine=not args.no_refine,
            random_state=args.seed,
            progress=not args.no_progress,
        )
    except ValueError as error:  # a tensor it refuses, such as a run's non-finite Q
        raise UsageError(str(error).strip().splitlines()[0]) from None
    seconds = time.perf_counter() - start
    rows = with_energy_about_mean(profile.rows, q.tensor)
    write_csv(out / "rank_profile.csv", {key: [row[key] for row in rows] for key in rows[0]})
    analysed = centred(q.tensor) if args.center else q.tensor
    spectra = spectral_energy(analysed, n_state_modes=q.n_state_modes)
    unfoldings = list(spectra.modes) + [spectra.matricization]
    labels = [f"mode{n + 1}" for n in range(len(spectra.modes))] + ["states_x_actions"]
    length = max(len(np.asarray(u.energy)) for u in unfoldings)
    table = {"k": np.arange(1, length + 1)}
    for label, unfolding in zip(labels, unfoldings, strict=True):
        table[label] = [unfolding_share(unfolding.energy, k) for k in range(1, length + 1)]
    write_csv(out / "spectral.csv", table)
    plot_rank_profile(profile, out / "rank_profile")
    return summary_lines(q, rows, spectra, seconds, centred=args.center)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m analysis.rank``; return the exit code (`run_command`)."""

    def work(args: argparse.Namespace) -> list[str]:
        lines = run(args)
        out = Path(args.out)
        return [*lines, f"wrote {out / 'rank_profile.csv'}, spectral.csv, rank_profile.png/.pdf"]

    return run_command(build_parser(), argv, work)
