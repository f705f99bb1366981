"""Build the page "Does the paper reproduce?" (``docs/results.md``) from committed result tables.

``python -m rl.experiments.results_page`` reads the small tables in
``docs/results/`` (`rl.experiments.results_tables`) and writes
``docs/results.md`` and one figure per claim beside the tables, and the
measurement tables that other pages mark (`rl.experiments.page_tables`) from
their CSV files there, in seconds; it trains nothing and reads no run
directory. ``--check`` writes nothing and exits 1 when a page differs from what
the command would write.

References
----------
TEQL paper, Section "Numerical Study" (sec:experiments).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rl.agents.readings import PAPER_TABLE
from rl.experiments.claims import (
    CLAIMS,
    MIN_SEEDS,
    Check,
    Claim,
    LineKey,
    combine,
    energy_verdict,
)
from rl.experiments.page_tables import fill_tables, table_names
from rl.experiments.paper import PAPER_ABLATION_STD, PAPER_FIGURE
from rl.experiments.paper_report import RANK_QUOTE
from rl.experiments.results_tables import (
    READINGS,
    Decided,
    Tables,
    decide_claim,
    read_tables,
)
from tensorq.version import add_version_option

DOCS = Path(__file__).resolve().parents[2] / "docs"

# ----------------------------------------------------------------------------- the page


def _num(value: float, digits: int = 2) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.{digits}f}"


def _interval_text(d: Decided) -> str:
    if not math.isfinite(d.estimate):
        return "-"
    if not math.isfinite(d.low):
        return "none recorded"
    return f"[{_num(d.low)}, {_num(d.high)}]"


def _scale(decided: Sequence[Decided]) -> str:
    """Return the seeds and episodes the decided checks rest on, and whether at full scale."""
    measured = [d for d in decided if d.seeds]
    if not measured:
        return "not measured"
    seeds = sorted({d.seeds for d in measured})
    shown = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    short = sorted({d.episodes for d in measured if not _full_episodes(d)})
    episodes = (
        "the paper's episodes" if not short else f"{', '.join(map(_thousands, short))} episodes"
    )
    flag = "" if _at_scale(measured) else " (**below the paper's scale**)"
    return f"{shown} seeds, {episodes}{flag}"


def _at_scale(decided: Sequence[Decided]) -> bool:
    """Return whether every measured check of ``decided`` is at the paper's scale."""
    return all(d.full for d in decided if d.seeds)


def _scale_mark(decided: Sequence[Decided]) -> str:
    """Return what a summary cell adds to its verdict: below the paper's scale, not measured."""
    if not any(d.seeds for d in decided):
        return " (not measured)"
    return "" if _at_scale(decided) else " (below the paper's scale)"


def _full_episodes(d: Decided) -> bool:
    return d.episodes == PAPER_TABLE[d.check.lines[0][1]]["episodes"]


def _thousands(value: int) -> str:
    return f"{value:,}"


def _paper_numbers(claim: Claim) -> str:
    if claim.paper:
        return claim.paper
    envs = sorted({key[1] for check in claim.checks for key in check.lines})
    if claim.key.startswith("ablation"):
        return "; ".join(
            f"{e}: std {PAPER_ABLATION_STD[e][0]} (lambda = 0), {PAPER_ABLATION_STD[e][1]} "
            "(lambda > 0)"
            for e in envs
            if e in PAPER_ABLATION_STD
        )
    if claim.key in ("compare", "gap"):
        return "; ".join(
            f"{env} {line.upper()} about {value.value:g} ({value.source})"
            for (env, line), value in PAPER_FIGURE.items()
        )
    return "none given in numbers"


def paper_value(check: Check) -> float:
    """Return the paper's own value of ``check``'s quantity where the paper gives one, else NaN.

    The ablation's standard deviations (`rl.experiments.paper.PAPER_ABLATION_STD`) give
    the std ratios and their log gaps; Highway's reach claim a lead of 2,000 episodes.
    """
    envs = [key[1] for key in check.lines]
    if check.kind == "ratio" and check.lines[0][2] == "teql-lam0":
        lam0, lam = PAPER_ABLATION_STD[envs[0]]
        return lam0 / lam
    if check.quantity == "std-ratio":
        (a0, a1), (b0, b1) = PAPER_ABLATION_STD[envs[0]], PAPER_ABLATION_STD[envs[2]]
        return math.log(a0 / a1) - math.log(b0 / b1)
    if check.quantity == "reach":
        return 2000.0
    return math.nan


def figure(claim: Claim, results: Mapping[str, Sequence[Decided]], path: Path) -> None:
    """Draw each check's estimate and 95% interval per reading, beside the claim's threshold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link: remove it first.")
    checks = list(claim.checks)
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.28 * len(checks) * len(READINGS)), dpi=72)
    colours = {"released": "tab:blue", "paper": "tab:orange", "stable": "tab:green"}
    y = 0
    ticks, labels = [], []
    for index, check in enumerate(checks):
        for reading in READINGS:
            d = results[reading][index]
            if math.isfinite(d.estimate):
                low = d.low if math.isfinite(d.low) else d.estimate
                high = d.high if math.isfinite(d.high) else d.estimate
                ax.errorbar(
                    d.estimate,
                    y,
                    xerr=[[d.estimate - low], [high - d.estimate]],
                    fmt="o",
                    color=colours[reading],
                    mfc=colours[reading] if d.full else "white",
                    ms=4,
                    capsize=2,
                    label=reading if index == 0 else None,
                )
            y -= 1
        paper = paper_value(check)
        if math.isfinite(paper):
            ax.plot(
                paper, y + len(READINGS) / 2 + 0.5, "kx", ms=5, label="paper" if not index else None
            )
        ticks.append(y + len(READINGS) / 2 + 0.5)
        labels.append(check.label)
        y -= 0.5
    for value in (check.threshold,) + ((-check.threshold,) if check.side == "within" else ()):
        ax.axvline(value, color="black", lw=0.8, ls="--")
    if all(check.kind == "ratio" for check in checks):
        ax.set_xscale("log")
    ax.set_yticks(ticks, labels, fontsize=6)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(
        f"{claim.key}: ours, estimate and 95% interval (hollow: below the paper's scale); "
        "x: the paper",
        fontsize=7,
    )
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def render(tables: Tables, figures: Path | None = None) -> str:
    """Return the page's Markdown; with ``figures``, also draw one PNG per claim there."""
    out = [
        "# Does the paper reproduce?",
        "",
        "*Reference.* Every claim of the paper's Numerical Study that",
        "`python -m rl.reproduce paper`'s report tests (`rl.experiments.claims`), with its",
        "verdict in each reading at the paper's scale (100 seeds, the paper's episodes:",
        "Pendulum 40,000, CartPole and Highway 10,000), the interval that decides it, the",
        "seeds and episodes it rests on, and the command that measures it again. A row",
        "measured below the paper's scale says so. The readings are explained in",
        "[Tensor agents](agents.md) and [The authors' code and this one](authors-code.md).",
        "",
        "This page is generated: `python -m rl.experiments.results_page` writes it from the",
        "tables in `docs/results/` (`lines.csv`: each line's final-window greedy return;",
        "`checks.csv`: checks that need more than a line's mean and standard deviation),",
        "without training. Each table row comes from a run of the command its section",
        "names.",
        "",
        "**Decision rule** (`rl.experiments.claims`): a check holds when its whole 95%",
        "interval lies on the claim's side of the threshold, does not hold when it lies",
        "wholly on the other side, and cannot tell otherwise, when a line is missing or has",
        f"fewer than {MIN_SEEDS} seeds. A claim holds when all its checks hold and does not",
        "hold when any does not. The report itself uses a seed bootstrap; from the tables",
        "here, an interval is normal theory from each line's mean, standard deviation and",
        "seeds unless the row says it was recorded.",
        "",
        "## Summary",
        "",
        "| # | claim | section | " + " | ".join(READINGS) + " | rests on (released) |",
        "|---|---|---|" + "---|" * len(READINGS) + "---|",
    ]
    sections = []
    for number, claim in enumerate(CLAIMS, start=1):
        results = {r: decide_claim(claim, r, tables) for r in READINGS}
        decided = {r: results[r][1] for r in READINGS}
        verdicts = " | ".join(f"**{results[r][0]}**" + _scale_mark(decided[r]) for r in READINGS)
        out.append(
            f"| {number} | [{claim.quote}](#{claim.key}) | {claim.section} | {verdicts} | "
            f"{_scale(decided['released'])} |"
        )
        sections += _section(number, claim, results, tables, figures)
    out.append(_rank_row(tables))
    out += ["", *sections, *_rank_section(tables)]
    return "\n".join(out) + "\n"


def _section(
    number: int,
    claim: Claim,
    results: Mapping[str, tuple[str, list[Decided]]],
    tables: Tables,
    figures: Path | None,
) -> list[str]:
    decided = {r: results[r][1] for r in READINGS}
    if figures is not None:
        figure(claim, decided, figures / f"{claim.key}.png")
    experiment = claim.checks[0].lines[0][0]  # a line's part is its experiment's name
    lines = [
        f"## {number}. {claim.key} {{#{claim.key}}}",
        "",
        f"> {claim.quote}",
        "",
        f"Section: {claim.section}. The paper's numbers: {_paper_numbers(claim)}.",
        "",
        "Verdicts: "
        + "; ".join(f"{r} **{results[r][0]}** ({_scale(decided[r])})" for r in READINGS)
        + ".",
        "",
        f"![{claim.key}: each check's estimate and interval](results/{claim.key}.png)",
        "",
        "| check | reading | estimate | 95% interval | verdict | seeds | episodes | interval |",
        "|---|---|---:|---|---|---:|---:|---|",
    ]
    for index, check in enumerate(claim.checks):
        for reading in READINGS:
            d = decided[reading][index]
            seeds = str(d.seeds) if d.seeds else "-"
            episodes = _thousands(d.episodes) if d.episodes else "-"
            below = "" if d.full or not d.seeds else " (below the paper's scale)"
            lines.append(
                f"| {check.label} | {reading} | {_num(d.estimate)} | {_interval_text(d)} | "
                f"{d.verdict}{below} | {seeds} | {episodes} | {d.how} |"
            )
    lines += _lines_table(claim, tables)
    lines += [
        "",
        f"**What it means.** {tables.meanings.get(claim.key, '')}",
        "",
        "Measured again by (one command per reading; `--scale` of the whole paper in",
        "[Reproducing the paper](reproduce.md)):",
        "",
        "```",
        f"python -m rl.reproduce {experiment} --reading READING --seeds 100 --postprocess",
        "```",
        "",
    ]
    return lines


def paper_line(key: LineKey) -> str:
    """Return the paper's number for line ``key``: its figure's value or its ablation std."""
    part, env, line = key
    if part == "comparison" and (env, line) in PAPER_FIGURE:
        value = PAPER_FIGURE[env, line]
        return f"about {value.value:g}" + (
            f" at episode {value.episodes:,}" if value.episodes else ""
        )
    if part == "ablation" and line in ("teql-lam0", "teql-lam"):
        return f"std {PAPER_ABLATION_STD[env][line == 'teql-lam']}"
    return ""


def _lines_table(claim: Claim, tables: Tables) -> list[str]:
    keys = list(dict.fromkeys(key for check in claim.checks for key in check.lines))
    rows = [
        tables.lines[key, reading]
        for key in keys
        for reading in READINGS
        if (key, reading) in tables.lines
    ]
    if not rows:
        return []
    out = [
        "",
        "| line | reading | seeds | episodes | final window | mean ± std | the paper | note |",
        "|---|---|---:|---:|---|---:|---|---|",
    ]
    for line in rows:
        part, env, key = line.key
        out.append(
            f"| {part} / {env} / {key} | {line.reading} | {line.seeds} | "
            f"{_thousands(line.episodes)} | {line.window} | {line.shown} | "
            f"{paper_line(line.key)} | {line.note} |"
        )
    return out


def _rank_row(tables: Tables) -> str:
    verdict = combine([energy_verdict(float(row["energy"])) for row in tables.rank])
    return (
        f"| rank | [{RANK_QUOTE}](#rank) | sec:experiments | "
        + " | ".join(f"**{verdict}**" for _ in READINGS)
        + " | Q* of Pendulum and CartPole (a fit, no seeds); Highway cannot tell (no Q*) |"
    )


def _rank_section(tables: Tables) -> list[str]:
    out = [
        "## The rank claim {#rank}",
        "",
        f"> {RANK_QUOTE}",
        "",
        "The energy of the best rank-10 CP fit of Q* of the discretized problem (the same",
        "for every reading: it is a property of the problem, not of an agent); more than",
        "0.9 holds. No interval: it is a fit ([Analysis](analysis.md)). Highway has no",
        "model to compute Q* from, so cannot tell.",
        "",
        "| environment | gamma | rank | CP energy | smallest rank above 0.9 | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in tables.rank:
        out.append(
            f"| {row['env']} | {row['gamma']} | {row['rank']} | {row['energy']} | "
            f"{row['smallest_rank_90']} | {energy_verdict(float(row['energy']))} |"
        )
    out += [
        "",
        "Measured again by `python -m analysis.rank --env ENV --gamma 0.99 --ranks 1:20`.",
        "The paper's parameter counts are checked in",
        "[Parameter matching](parameter-matching.md).",
    ]
    return out


def expected_pages(docs: Path = DOCS) -> dict[Path, str]:
    """Return each generated page under ``docs`` and the text the command writes to it.

    ``results.md`` is generated whole (`render`); every other page keeps its prose
    and gets its marked tables from their CSV files (`rl.experiments.page_tables`).
    """
    data = docs / "results"
    tables = read_tables(data)
    pages = {docs / "results.md": render(tables)}
    for page in sorted(docs.rglob("*.md")):
        if page in pages or page.is_relative_to(data):
            continue
        text = page.read_text(encoding="utf-8")
        if table_names(text):
            try:
                pages[page] = fill_tables(text, data, tables)
            except ValueError as error:
                raise ValueError(f"{page}: {error}") from None
    return pages


def stale_pages(docs: Path = DOCS) -> list[Path]:
    """Return the generated pages under ``docs`` whose text differs from what the command writes."""
    return [
        page
        for page, text in expected_pages(docs).items()
        if not page.is_file() or page.read_text(encoding="utf-8") != text
    ]


def build(docs: Path = DOCS) -> list[Path]:
    """Write ``docs/results.md``, its figures and every page's marked tables; return the pages."""
    pages = expected_pages(docs)
    for page in pages:
        if page.is_symlink():
            raise ValueError(f"{page} is a symbolic link: remove it first.")
    render(read_tables(docs / "results"), figures=docs / "results")
    for page, text in pages.items():
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            page.write_text(text, encoding="utf-8")
    return list(pages)


def build_parser() -> argparse.ArgumentParser:
    """Return the command line's parser (``python -m rl.experiments.results_page``)."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.experiments.results_page",
        description="Write docs/results.md and its figures, and every page's measurement "
        "tables between their markers, from the tables in docs/results/ (no training; under "
        "a minute).",
    )
    parser.add_argument(
        "--docs", type=Path, default=DOCS, help="the docs directory (default: the repository's)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming each page that differs from what the command writes",
    )
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    args = build_parser().parse_args(argv)
    try:
        if args.check:
            stale = stale_pages(args.docs)
            for page in stale:
                print(
                    f"error: {page} is stale: run python -m rl.experiments.results_page",
                    file=sys.stderr,
                )
            return 1 if stale else 0
        pages = build(args.docs)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(pages)} pages: " + ", ".join(str(page) for page in pages))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
