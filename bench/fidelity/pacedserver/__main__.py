"""``python -m bench.fidelity.pacedserver``: the paced server
(:func:`bench.fidelity.cli.pacedserver_main`)."""

from bench.fidelity.cli import pacedserver_main

if __name__ == "__main__":
    raise SystemExit(pacedserver_main())
