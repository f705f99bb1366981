"""Hyperparameter search on Optuna: ``python -m rl.tune`` (see `rl.tune.cli`).

`rl.tune.space` reads the search space file, `rl.tune.study` runs the trials
(S seeds in lockstep each) on a SQLite study, and `rl.tune.results` writes the
trial table, the best config and Optuna's plots. Optuna is imported only when a
study is opened (``pip install "teql[tune]"``).
"""
