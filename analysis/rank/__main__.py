"""``python -m analysis.rank``: the command of `analysis.rank.cli`."""

from analysis.rank.cli import main

raise SystemExit(main())
