"""Where low rank pays: TEQL, TLR and tabular Q-learning on problems of known Q* rank.

The problems are `rl.envs.lowrank_mdp.PlantedRankMDP` instances, whose Q* has
a chosen CP rank (or full rank) and is known exactly, so every greedy policy
is scored exactly on the model. Modules: `analysis.lowrank_suite.grid` (the
instances, agent set-ups and exact reference), `analysis.lowrank_suite.measure`
(one batch on the runner), `analysis.lowrank_suite.verdicts` (faster / equal /
slower with its interval), `analysis.lowrank_suite.report` (rank brackets,
figure tables, figures), `analysis.lowrank_suite.cost` (the cost model) and
`analysis.lowrank_suite.cli` (``python -m analysis.lowrank_suite``).
"""
