"""`python -m llmsweep ...`: the `llmsweep` command, for an environment whose scripts directory is not on PATH."""

from llmsweep.cli.entry import main

if __name__ == "__main__":
    main()
