"""``python -m bench.fidelity``: the client-fidelity harness (:mod:`bench.fidelity.harness`)."""

from bench.fidelity.harness import main

if __name__ == "__main__":
    raise SystemExit(main())
