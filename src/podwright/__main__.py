"""``python -m podwright``: the same command line as the ``podwright`` entry point."""

from podwright.cli.main import main

main()
