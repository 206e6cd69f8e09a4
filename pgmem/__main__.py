"""``python -m pgmem``: the same command line as the ``pgmem`` script."""

from pgmem.cli import main

raise SystemExit(main())
