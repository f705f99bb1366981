"""``python -m analysis.bounds``: the command of `analysis.bounds.cli`."""

from analysis.bounds.cli import main

raise SystemExit(main())
