import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rl.runs.metrics import MetricsWriter, read_metrics
from rl.runs.plot import main, moving_average, plot_runs, seed_band

ROOT = Path(__file__).resolve().parents[2]


def _fake_run(run_dir: Path, seeds=(0, 1, 2), episodes=40, offset=0.0):
    run_dir.mkdir()
    writer = MetricsWriter(run_dir / "metrics.csv")
    for episode in range(1, episodes + 1):
        for seed in seeds:
            greedy = episode + seed + offset if episode % 10 == 0 else float("nan")
            writer.write(seed, episode, episode * 0.5 + seed, 10, greedy, episode * 0.01)
    writer.close()
    (run_dir / "config.json").write_text('{"agent": "random", "seeds": 3}')
    return run_dir


def test_moving_average():
    values = np.array([[1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_allclose(moving_average(values, 2), [[1.0, 1.5, 2.5, 3.5]])
    np.testing.assert_array_equal(moving_average(values, 1), values)


def test_seed_band_drops_episodes_without_values(tmp_path):
    table = read_metrics(_fake_run(tmp_path / "run") / "metrics.csv")
    episodes, mean, std = seed_band(table, "greedy_return", smooth=1)
    assert episodes.tolist() == [10, 20, 30, 40]
    np.testing.assert_allclose(mean, [11.0, 21.0, 31.0, 41.0])
    np.testing.assert_allclose(std, np.std([0.0, 1.0, 2.0]))


def test_plot_writes_png(tmp_path):
    runs = [_fake_run(tmp_path / "a"), _fake_run(tmp_path / "b", offset=5.0)]
    out = plot_runs(runs, tmp_path / "curves.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert (
        main(
            [str(r) for r in runs]
            + ["--out", str(tmp_path / "c.png"), "--smooth", "3", "--label", "A", "--label", "B"]
        )
        == 0
    )
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_plot_command_in_subprocess(tmp_path):
    run = _fake_run(tmp_path / "run")
    done = subprocess.run(
        [sys.executable, "-m", "rl.runs.plot", str(run), "--out", str(tmp_path / "fig.png")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_missing_metrics_exits_2(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    assert "metrics.csv" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--out", str(tmp_path / "x.png"), "--label", "a", "--label", "b"])


@pytest.mark.parametrize("config", ["[" * 100_000 + "]" * 100_000, "[1, 2]", "{}"])
def test_a_config_json_that_is_not_ours_labels_the_curve_with_the_name(tmp_path, config):
    run = _fake_run(tmp_path / "run")
    (run / "config.json").write_text(config)
    assert plot_runs([run], tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
