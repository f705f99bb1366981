"""``python -m analysis.bounds``: the paper's bounds for given constants, or against a run.

Constants::

    python -m analysis.bounds --gamma 0.99 --r-max 73.04 [--rank 10] [--order 5]
        [--step-size 0.005] [--lam 1e-3] [--eps 1e-4] [--visits 0 1 10 100]
        [--max-inner 10] [--b-r 0] [--noise 0] [--c 2] [--delta 1] [--t0 0]
        [--horizon 100000]

prints V_max, F_max = (V_max / R)^(1/N), Proposition 2's bound (per sweep and
times I_max) at the given visit counts, the Theorem 1 limit (A.2) and
Proposition 3's bound (A.4).

Against a run::

    python -m analysis.bounds --env lowrank|inventory --episodes N --out DIR
        [--seeds B] [--seed S] [--rank R] [--set KEY=VALUE ...] [--no-progress]

trains TEQL (bounded iterates, gamma 0.9) on the exact-model problem, writes
``updates.csv``, ``prop3.csv``, ``summary.csv`` and ``bounds_ENV.png`` /
``.pdf`` to ``--out`` and prints the largest Delta Q / bound ratio, the
Theorem 1 constants and the Proposition 3 counts (see `analysis.bounds.runs`).

Every output file is written atomically and never through a symbolic link: a link
(or anything but a regular file) at an output's name in ``--out`` is refused before
training starts.

Exit codes: 0 done; 1 an output could not be written; 2 bad input, including
``--seeds`` and ``--episodes`` whose records would not fit in memory (one line on
stderr).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from analysis.rank.cli import (
    OneLineParser,
    UsageError,
    check_gamma,
    prepare_out,
    run_command,
    write_csv,
)
from tensorq.version import add_version_option


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.bounds``."""
    parser = OneLineParser(
        prog="python -m analysis.bounds",
        description="Theorem 1 and Propositions 2-3 of the TEQL paper, for given constants "
        "or against a TEQL run on an exact-model problem.",
    )
    constants = parser.add_argument_group("constants (without --env)")
    constants.add_argument("--gamma", type=float, help="discount in (0, 1)")
    constants.add_argument("--r-max", type=float, help="reward bound R_max > 0")
    constants.add_argument("--rank", type=int, default=None, help="CP rank R (10; run mode: 5)")
    constants.add_argument("--order", type=int, default=5, help="tensor order N (default 5)")
    constants.add_argument("--step-size", type=float, default=0.005, help="alpha_t")
    constants.add_argument("--lam", type=float, default=1e-3, help="lambda")
    constants.add_argument("--eps", type=float, default=1e-4, help="epsilon of the loss")
    constants.add_argument(
        "--visits",
        type=float,
        nargs="+",
        default=[0, 1, 10, 100, 1000],
        help="visit counts N at which to evaluate the bounds (default %(default)s)",
    )
    constants.add_argument("--max-inner", type=int, default=10, help="I_max")
    constants.add_argument("--b-r", type=float, default=0.0, help="B_R")
    constants.add_argument("--noise", type=float, default=0.0, help="eps_bar of (A.2)")
    constants.add_argument("--c", type=float, default=2.0, help="EUGE coefficient c")
    constants.add_argument("--delta", type=float, default=1.0, help="margin delta of (A.4)")
    constants.add_argument("--t0", type=int, default=1, help="t0 of (A.4), >= 1")
    constants.add_argument("--horizon", type=int, default=100_000, help="T of (A.4)")
    runs = parser.add_argument_group("against a run")
    runs.add_argument("--env", help="lowrank or inventory")
    runs.add_argument("--episodes", type=int, default=200, help="training episodes (100 steps)")
    runs.add_argument("--out", default="bounds-out", help="output directory")
    runs.add_argument("--seeds", type=int, default=1, help="replicas B")
    runs.add_argument("--seed", type=int, default=0, help="first seed")
    runs.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="TEQL parameter override (repeatable)",
    )
    runs.add_argument("--no-progress", action="store_true", help="no progress bar")
    return add_version_option(parser)


def factor_growth(f_max: float, order: int) -> float:
    """Return F_max^(2(N-1)) (Proposition 2), inf where it exceeds the float range."""
    with np.errstate(over="ignore"):
        return float(np.float64(f_max) ** (2 * (order - 1)))


def constants_report(args: argparse.Namespace) -> list[str]:
    """V_max, F_max and the bounds for the constants given on the command line."""
    from analysis import bounds

    if args.gamma is None or args.r_max is None:
        raise UsageError(
            "give --gamma and --r-max (constants), or --env with --episodes and --out."
        )
    check_gamma(args.gamma)
    if not args.r_max > 0:
        raise UsageError(f"--r-max must be > 0, got {args.r_max!r}.")
    rank = 10 if args.rank is None else args.rank
    try:
        v_max = bounds.v_max(args.r_max, args.gamma)
        if rank < 1 or args.order < 1 or args.max_inner < 1:
            raise ValueError("--rank, --order and --max-inner must be >= 1.")
        f_max = (v_max / rank) ** (1.0 / args.order)
        visits = np.asarray(args.visits, dtype=np.float64)
        sweep = np.atleast_1d(
            bounds.prop2_bound(
                step_size=args.step_size,
                order=args.order,
                rank=rank,
                f_max=f_max,
                v_max=v_max,
                lam=args.lam,
                visits=visits,
                eps=args.eps,
            )
        )
        limit = bounds.theorem1_limit(args.gamma, args.b_r, args.noise)
        prop3 = bounds.prop3_bound(t0=args.t0, c=args.c, delta=args.delta, horizon=args.horizon)
    except ValueError as error:
        raise UsageError(str(error)) from None
    growth = factor_growth(f_max, args.order)
    lines = [
        f"V_max = R_max / (1 - gamma) = {v_max:.6g}",
        f"F_max = (V_max / R)^(1/N) = {f_max:.6g}   (R = {rank}, N = {args.order}); "
        f"F_max^(2(N-1)) = {growth:.6g}",
        f"Proposition 2, eq. (A.3), alpha = {args.step_size:g}, lambda = {args.lam:g}, "
        f"epsilon = {args.eps:g}:",
    ]
    for n, value in zip(visits, sweep, strict=True):
        lines.append(
            f"  N = {n:g}: one sweep {value:.6g}, I_max = {args.max_inner} steps per mode "
            f"{args.max_inner * value:.6g}  (trivial bound 2 V_max = {2 * v_max:.6g})"
        )
    lines += [
        f"Theorem 1 limit, eq. (A.2): (B_R + eps_bar) / (1 - gamma) = {limit:.6g} "
        f"(B_R = {args.b_r:g}, eps_bar = {args.noise:g})",
        f"Proposition 3, eq. (A.4): t0 + 16 c^2 / delta^2 log T = {prop3:.6g} "
        f"(t0 = {args.t0}, c = {args.c:g}, delta = {args.delta:g}, T = {args.horizon})",
    ]
    return lines


class _ProgressBar:
    """A tqdm bar over episodes, opened at the first tick (so early errors print alone)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.bar = total, enabled, None

    def tick(self, episode: int) -> None:
        if self.bar is None and self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, unit="episode", leave=False)
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_report(args: argparse.Namespace) -> list[str]:
    """Run the bound study of `analysis.bounds.runs` and write its tables and figure."""
    from analysis.bounds.runs import (
        plot_bound_overlays,
        prop2_check,
        prop3_table,
        record_bound_run,
        theorem1_curves,
    )
    from analysis.qstar import EXACT_ENVS
    from analysis.rank import rank_profile
    from rl.runs.config import ConfigError, parse_assignment

    if args.env not in EXACT_ENVS:
        raise UsageError(f"--env must be one of {', '.join(EXACT_ENVS)}, got {args.env!r}.")
    if args.episodes < 1 or args.seeds < 1:
        raise UsageError("--episodes and --seeds must be >= 1.")
    rank = 5 if args.rank is None else args.rank
    try:
        overrides = dict(parse_assignment(text) for text in args.set)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if args.gamma is not None:
        check_gamma(args.gamma)
        overrides.setdefault("gamma", args.gamma)
    for key in ("gamma", "rank"):  # a flag and --set of the same parameter must agree
        flag = getattr(args, key)
        if flag is not None and overrides.get(key, flag) != flag:
            raise UsageError(
                f"--{key} {flag:g} and --set {key}={overrides[key]!r} differ; give {key} once."
            )
    names = ("updates.csv", "prop3.csv", "summary.csv")
    out = prepare_out(args.out, (*names, *(f"bounds_{args.env}{s}" for s in (".png", ".pdf"))))
    bar = _ProgressBar(args.episodes, not args.no_progress)
    try:
        record = record_bound_run(
            args.env,
            args.episodes,
            seeds=args.seeds,
            seed=args.seed,
            rank=rank,
            agent_params=overrides,
            progress=bar.tick,
        )
    except ValueError as error:
        raise UsageError(str(error).strip().splitlines()[0]) from None
    finally:
        bar.close()
    s = record.settings
    b_r = rank_profile(record.q_star.tensor, [s.rank], restarts=3, random_state=args.seed)
    b_r = float(b_r.rows[0]["b_r_upper"])
    bound, ratio = prop2_check(record)
    curves = theorem1_curves(record, b_r)
    prop3 = prop3_table(record)
    write_csv(out / "updates.csv", {**record.updates, "prop2_bound": bound})
    write_csv(out / "prop3.csv", prop3)
    violated = int((record.updates["delta_q"] > bound).sum())
    final = float(curves.measured[-1])
    summary = {
        "gamma": [s.gamma],
        "rank": [s.rank],
        "order": [s.order],
        "v_max": [s.v_max],
        "f_max": [s.f_max],
        "f_max_growth": [factor_growth(s.f_max, s.order)],
        "updates": [len(bound)],
        "prop2_violations": [violated],
        "prop2_max_ratio": [ratio],
        "prop2_min_bound": [float(bound.min())],
        "b_r": [b_r],
        "e0": [float(record.initial_error[0])],
        "final_sup_error": [final],
        "noise_bar": [curves.noise_bar],
        "theorem1_limit": [curves.limit],
        "theorem1_exceeded_updates": [float(np.mean(curves.measured > curves.bound_updates))],
        "theorem1_exceeded_phases": [float(np.mean(curves.measured > curves.bound_phases))],
        "covering_phases": [int(record.updates["phase"][record.updates["replica"] == 0].max())],
        "prop3_pairs": [len(prop3["t0"])],
        "prop3_max_reselection_ratio": [
            float(np.max(prop3["reselections"] / prop3["log_term"], initial=0.0))
        ],
    }
    write_csv(out / "summary.csv", summary)
    figures = plot_bound_overlays(record, curves, out / f"bounds_{args.env}")
    lines = [
        f"TEQL on {s.env}: R = {s.rank}, N = {s.order}, gamma = {s.gamma:g}, "
        f"{s.episodes} episodes x {s.replicas} seed(s), {len(bound)} updates",
        f"V_max = {s.v_max:.4g}, F_max = {s.f_max:.4g}, F_max^(2(N-1)) = "
        f"{summary['f_max_growth'][0]:.4g}",
        f"Proposition 2: {violated} violations; largest Delta Q / bound = {ratio:.3g}; "
        f"smallest bound {bound.min():.4g} vs trivial 2 V_max = {2 * s.v_max:.4g}"
        + ("  (vacuous: above 2 V_max)" if bound.min() > 2 * s.v_max else ""),
        f"Theorem 1: B_R = {b_r:.4g}, ||Q_0 - Q*|| = {record.initial_error[0]:.4g}, "
        f"final ||Q_T - Q*|| = {final:.4g}, eps_bar = {curves.noise_bar:.4g}, "
        f"limit (A.2) = {curves.limit:.4g}",
        f"  measured above eq. (A.1) at {summary['theorem1_exceeded_updates'][0]:.1%} of updates "
        f"(t = updates) and {summary['theorem1_exceeded_phases'][0]:.1%} (t = covering phases; "
        f"{summary['covering_phases'][0]} phases completed)",
        f"Proposition 3: {len(prop3['t0'])} (delta, pair) cases meet the conditions; largest "
        f"re-selections / (16 c^2/delta^2 log T) = {summary['prop3_max_reselection_ratio'][0]:.3g}",
        "wrote " + ", ".join(str(p) for p in figures) + f", and CSV tables in {out}",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m analysis.bounds``; return the exit code (`run_command`)."""

    def work(args: argparse.Namespace) -> list[str]:
        return run_report(args) if args.env is not None else constants_report(args)

    return run_command(build_parser(), argv, work)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
