"""`python -m docdelta` runs the same entry point as the `docdelta` console script."""

from docdelta.cli import main

raise SystemExit(main())
