"""``python -m gemma4``: the same as the ``gemma4`` console script."""

from gemma4._start import main

raise SystemExit(main())
