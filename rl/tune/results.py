"""What ``python -m rl.tune`` writes beside its study: the trial table, the best config, plots.

* ``trials.csv``: one row per trial of the study, in trial order: its number,
  state (COMPLETE, PRUNED, FAIL, RUNNING, WAITING), score, the last episode it
  reported at, its parameters (one column each), the trial it reruns (a trial of
  a process that died), its wall time in seconds, its run directory and error.
* ``best_config.json``: the ``config.json`` of the best complete trial with
  ``out`` set to ``OUT/best-run``: ``python -m rl.train --config best_config.json``
  trains it again, to the same numbers (but for ``metrics.csv``'s ``wall_time``).
* ``importance.png`` and ``history.png``: Optuna's parameter importances and
  optimization history (``optuna.visualization.matplotlib``), drawn once the
  study has enough complete trials (two, and a parameter that varies).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, NamedTuple

from rl.runs.config import load_config_file
from rl.runs.rundir import atomic_write_bytes, atomic_write_text
from rl.runs.training import CONFIG_FILE, config_text
from rl.tune.study import require_optuna, trial_dir

TABLE_FILE = "trials.csv"
BEST_CONFIG_FILE = "best_config.json"
BEST_RUN_DIR = "best-run"
IMPORTANCE_FILE = "importance.png"
HISTORY_FILE = "history.png"


class Written(NamedTuple):
    """Files `write_results` wrote, and why a plot was not drawn (None when it was)."""

    files: list[Path]
    skipped: dict[str, str]


def trial_rows(study: Any, out: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Return the columns of ``trials.csv`` and one row per trial of ``study``."""
    names = [f"params.{n}" for n in sorted({n for t in study.trials for n in t.params})]
    columns = ["number", "state", "value", "last_report", *names]
    columns += ["retry_of", "wall_s", "run_dir", "error"]
    rows = []
    for t in study.trials:
        duration = t.duration.total_seconds() if t.duration is not None else None
        steps = sorted(t.intermediate_values)
        rows.append(
            {
                "number": t.number,
                "state": t.state.name,
                "value": "" if t.value is None else repr(float(t.value)),
                "last_report": steps[-1] if steps else "",
                **{f"params.{n}": json.dumps(v) for n, v in t.params.items()},
                "retry_of": t.system_attrs.get("failed_trial", ""),
                "wall_s": "" if duration is None else f"{duration:.1f}",
                "run_dir": str(trial_dir(out, t.number)),
                "error": t.user_attrs.get("error", ""),
            }
        )
    return columns, rows


def _table_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def _plot(draw: Any, study: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    plt.switch_backend("agg")
    axes = draw(study)
    figure = axes.figure
    image = io.BytesIO()
    figure.set_size_inches(8, 5)
    figure.tight_layout()
    figure.savefig(image, dpi=110, format="png")
    plt.close(figure)
    atomic_write_bytes(path, image.getvalue())  # never through a link


def write_results(study: Any, out: Path) -> Written:
    """Write ``trials.csv``, ``best_config.json`` and the two plots into ``out``.

    Returns
    -------
    Written
    """
    optuna = require_optuna()
    from optuna.visualization import matplotlib as plots

    files, skipped = [out / TABLE_FILE], {}
    atomic_write_text(out / TABLE_FILE, _table_text(*trial_rows(study, out)))
    if not study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        names = (BEST_CONFIG_FILE, IMPORTANCE_FILE, HISTORY_FILE)
        return Written(files, dict.fromkeys(names, "no trial is complete yet"))
    config = load_config_file(trial_dir(out, study.best_trial.number) / CONFIG_FILE)
    config["out"] = str(out / BEST_RUN_DIR)
    atomic_write_text(out / BEST_CONFIG_FILE, config_text(config))
    files.append(out / BEST_CONFIG_FILE)
    for name, draw in (
        (IMPORTANCE_FILE, plots.plot_param_importances),
        (HISTORY_FILE, plots.plot_optimization_history),
    ):
        try:
            _plot(draw, study, out / name)
            files.append(out / name)
        except (ValueError, RuntimeError, ZeroDivisionError) as error:
            skipped[name] = " ".join(str(error).split()) or type(error).__name__
    return Written(files, skipped)
