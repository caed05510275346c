"""Calibrate against the paced fake server with known coefficients and print what came back.

    .venv/bin/python scripts/synthetic_calibration.py [OUT_DIR]

Starts ``bench.fidelity.pacedserver`` in step-model mode (coefficients TRUTH), runs a closed-loop
sweep with the project's benchmark client into OUT_DIR (default: a temporary folder), fits the model
on every cell and on alternate concurrency levels (held out), and prints truth vs fitted and
the held-out median errors. Synthetic data: no GPU, no vLLM.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fidelity.pacedserver import (  # noqa: E402
    SYNTHETIC_OUTPUT_TOKENS,
    SYNTHETIC_TRUTH,
    PacedServer,
    serving_in_thread,
    synthetic_model,
)
from bench.load.sweep import Grid, SweepOptions, run_sweep  # noqa: E402
from bench.results.store import load_run  # noqa: E402
from serving.capacity.calibration import calibrate, fit, observations  # noqa: E402
from serving.capacity.perf import Coefficients  # noqa: E402

TRUTH = SYNTHETIC_TRUTH


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/synthetic_calibration.py",
        description="Recover known step-model coefficients from a sweep against the paced "
        "fake server (synthetic data: no GPU, no vLLM).",
    )
    parser.add_argument(
        "out_dir", nargs="?", type=Path, help="where the run goes (default: a temporary folder)"
    )
    return parser


def main(argv: list[str]) -> int:
    given = build_parser().parse_args(argv).out_dir
    out = given if given is not None else Path(tempfile.mkdtemp(prefix="synthetic-run-"))
    grid = Grid(
        concurrency=(1, 2, 4, 8), prompt_tokens=(16, 300), output_tokens=(SYNTHETIC_OUTPUT_TOKENS,)
    )
    server = PacedServer(
        0.1, 0.02, output_tokens=SYNTHETIC_OUTPUT_TOKENS, step_model=synthetic_model(TRUTH)
    )
    with serving_in_thread(server) as url:
        run_sweep(
            url,
            "google/gemma-4-12B-it",
            grid,
            out,
            options=SweepOptions(
                min_requests=8,
                requests_per_slot=2,
                use_tokenize=False,
                progress=False,
                workers=1,
                max_model_len=32768,
                label="synthetic",
            ),
        )
    data = load_run(out)
    base = synthetic_model(Coefficients())
    obs = observations(data.cells, base.max_num_seqs)
    got = fit(base, obs)
    print(f"run: {out} ({len(obs)} cells, synthetic: paced fake server, no GPU)")
    print(f"{'coefficient':28} {'truth':>10} {'fitted':>10} {'error':>7}")
    for name, truth in TRUTH.as_dict().items():
        value = getattr(got, name)
        print(f"{name:28} {truth:10.4g} {value:10.4g} {abs(value - truth) / truth:7.1%}")
    calibration = calibrate(
        base,
        data.cells,
        hardware="synthetic",
        checkpoint="synthetic",
        vllm="paced fake",
        provenance={"run": str(out), "synthetic": True},
    )
    print("held-out median error (fit on alternate concurrencies, predict the others):")
    for metric, value in calibration.held_out_error.items():
        print(f"  {metric:14} {'-' if value is None else f'{value:.1%}'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
