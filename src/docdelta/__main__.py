"""`python -m docdelta` runs the same entry point as the `docdelta` console script."""

from docdelta.cli.main import main

raise SystemExit(main())
