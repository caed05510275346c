"""``python -m healthchecks``."""

from healthchecks.cli import main

raise SystemExit(main())
