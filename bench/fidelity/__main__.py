"""``python -m bench.fidelity``: the client-fidelity harness (:func:`bench.fidelity.cli.main`)."""

from bench.fidelity.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
