"""``python -m gemma4``: the same as the ``gemma4`` console script."""

from gemma4.cli import main

raise SystemExit(main())
