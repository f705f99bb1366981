"""Many runs: presets, the paper's experiments, sweeps and their executor, statistics.

`rl.experiments.presets` names environment-agent-reading triples, and
`rl.experiments.tuned_presets` reads the tuned settings of ``rl/presets/tuned/``;
`rl.experiments.paper` lists the paper's experiments as data for
``python -m rl.reproduce``; `rl.experiments.executor` runs many configurations
resumably on local processes or Ray (`rl.experiments.workers`);
`rl.experiments.stats`, `rl.experiments.report` and `rl.experiments.summary`
turn their metrics into tables and figures.
"""
