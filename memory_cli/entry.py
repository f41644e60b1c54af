"""The `hindsight` program: `--version` is answered before any command module is loaded."""

from __future__ import annotations

import sys


def print_version() -> None:
    """`hindsight <version>` from the installed package's metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        print(f"hindsight {version('hindsight')}")
    except PackageNotFoundError:  # run from a source tree that was never installed
        print("hindsight (not installed)")


def main() -> None:
    """Run the command line; `hindsight --version` alone skips loading the commands."""
    if sys.argv[1:] == ["--version"]:
        print_version()
        return
    from memory_cli.main import app

    app(prog_name="hindsight")
