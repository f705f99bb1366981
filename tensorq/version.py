"""The version of the installed ``teql`` distribution, and the ``--version`` option of its commands.

The three packages ``tensorq``, ``rl`` and ``analysis`` ship in one
distribution, ``teql``, so they share one version: the one its package
metadata records (``pyproject.toml``'s ``version``), read with
`importlib.metadata`. Imported from a source checkout that was never
installed, the version is `UNINSTALLED`.
"""

from __future__ import annotations

import argparse
from importlib import metadata

DISTRIBUTION = "teql"
"""Name of the distribution that holds ``tensorq``, ``rl`` and ``analysis``."""

UNINSTALLED = "0+unknown"
"""The version reported when ``teql`` is not installed (a source checkout on the path)."""


def distribution_version() -> str:
    """Return the installed version of ``teql``, or `UNINSTALLED` when it is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNINSTALLED


__version__ = distribution_version()


def add_version_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--version`` to a command's parser: it prints ``teql VERSION`` and exits 0.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser of one command.

    Returns
    -------
    argparse.ArgumentParser
        ``parser``, so that a ``build_parser`` can end with ``return add_version_option(parser)``.
    """
    parser.add_argument(
        "--version",
        action="version",
        version=f"{DISTRIBUTION} {__version__}",
        help="print the version of teql and exit",
    )
    return parser
