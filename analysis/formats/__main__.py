"""``python -m analysis.formats``: the command of `analysis.formats.cli`."""

from analysis.formats.cli import main

raise SystemExit(main())
