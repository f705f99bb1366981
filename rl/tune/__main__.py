"""``python -m rl.tune``: the command of `rl.tune.cli`."""

import sys

from rl.tune.cli import main

if __name__ == "__main__":
    sys.exit(main())
