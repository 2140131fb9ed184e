"""``python -m harness.cli``: the same as the ``harness`` console script."""

from . import main

if __name__ == "__main__":
    main(prog_name="harness")
