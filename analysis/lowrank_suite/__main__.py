"""``python -m analysis.lowrank_suite``: the command of `analysis.lowrank_suite.cli`."""

from analysis.lowrank_suite.cli import main

raise SystemExit(main())
