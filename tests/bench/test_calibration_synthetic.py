"""Calibration against a fake server with known coefficients.

The paced server in step-model mode answers as :class:`serving.capacity.perf.StepModel` would with
the
coefficients in TRUTH; a real sweep (the project's client, its store, the server's histograms)
runs against it, and the fit must recover TRUTH within 5 % and predict held-out concurrencies.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.fidelity.pacedserver import (
    SYNTHETIC_OUTPUT_TOKENS,
    SYNTHETIC_TRUTH,
    PacedServer,
    serving_in_thread,
    synthetic_model,
)
from bench.load.sweep import Grid, SweepOptions, run_sweep
from bench.results.store import load_run
from serving.capacity.calibration import Calibration, calibrate, observations
from serving.capacity.perf import Coefficients, Workload

#: One worker runs the sweep the module's tests share (scripts/check: --dist loadscope;
#: the group for a run with --dist loadgroup).
pytestmark = [pytest.mark.long, pytest.mark.xdist_group("synthetic-sweep")]

TRUTH = SYNTHETIC_TRUTH
MODEL = "google/gemma-4-12B-it"


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    server = PacedServer(
        0.1, 0.02, output_tokens=SYNTHETIC_OUTPUT_TOKENS, step_model=synthetic_model(TRUTH)
    )
    out = tmp_path_factory.mktemp("synthetic-run")
    main_loop = asyncio.get_event_loop_policy().get_event_loop()
    with serving_in_thread(server) as url:
        run_sweep(
            url,
            MODEL,
            Grid(
                concurrency=(1, 2, 4, 8),
                prompt_tokens=(16, 300),
                output_tokens=(SYNTHETIC_OUTPUT_TOKENS,),
            ),
            out,
            options=SweepOptions(
                num_requests=None,
                min_requests=8,
                requests_per_slot=2,
                use_tokenize=False,
                progress=False,
                workers=1,
                max_model_len=32768,
                label="synthetic",
            ),
        )
        asyncio.set_event_loop(main_loop)  # asyncio.run left the main thread without one
    yield out


@pytest.fixture(scope="module")
def synthetic_calibration(synthetic_run: Path) -> Calibration:
    """The calibration of the synthetic run, fitted once for the tests below: its coefficients
    are :func:`fit` on every cell (from the priors), its held-out error two more fits."""
    return calibrate(
        synthetic_model(Coefficients()),
        load_run(synthetic_run).cells,
        hardware="synthetic",
        checkpoint="synthetic",
        vllm="paced fake",
        provenance={"run": "synthetic", "synthetic": True},
    )


def _relative(a: float, b: float) -> float:
    return abs(a - b) / b


# The tests that use the synthetic run: the first one to run sets it up, a sweep in real time
# (its server paces the model's steps) of about a minute on an idle machine, and nearly two
# with three busy processes beside it on two cores. A bound against a hang, above the suite's.
SWEEP_TIMEOUT = pytest.mark.timeout(1200)


@SWEEP_TIMEOUT
def test_the_fit_recovers_the_servers_coefficients(
    synthetic_run: Path, synthetic_calibration: Calibration
) -> None:
    data = load_run(synthetic_run)
    base = replace(synthetic_model(Coefficients()), basis="priors")  # start from the priors
    obs = observations(data.cells, base.max_num_seqs)
    assert len(obs) == 8
    got = synthetic_calibration.coefficients  # calibrate() fits every cell from the priors
    # Every decode step of this sweep is bandwidth-bound, so the decode compute efficiency
    # cannot be told from the cells, and the bandwidth efficiency trades against the per-step
    # constant (a smaller efficiency and a smaller constant give the same steps): what the fit
    # must get right is every cell's step and TTFT, and the prefill it measures.
    fitted = replace(base, coefficients=got)
    truth = synthetic_model(TRUTH)
    steps = []
    for o in obs:
        w = Workload(round(o.prompt_tokens), round(o.output_tokens))
        want, have = truth.at_concurrency(o.batch, w), fitted.at_concurrency(o.batch, w)
        steps.append(_relative(have.step_s, want.step_s))
        assert steps[-1] <= 0.10, o.cell  # a loaded machine delays single tokens
        assert _relative(have.engine_ttft_s, want.engine_ttft_s) <= 0.10, o.cell
    assert statistics.median(steps) <= 0.05, steps
    assert _relative(got.prefill_compute_efficiency, TRUTH.prefill_compute_efficiency) <= 0.05


@SWEEP_TIMEOUT
def test_held_out_concurrencies_are_predicted(synthetic_calibration: Calibration) -> None:
    calibration = synthetic_calibration
    # Fit on concurrencies 1 and 4, predict 2 and 8 (and the other way round).
    assert calibration.provenance["levels"] == [1, 2, 4, 8]
    err = calibration.held_out_error
    assert err["itl"] is not None and err["itl"] <= 0.05, err
    assert err["tokens_per_s"] is not None and err["tokens_per_s"] <= 0.05, err
    assert err["e2e"] is not None and err["e2e"] <= 0.05, err
    assert err["ttft"] is not None and err["ttft"] <= 0.10, err
    assert calibration.synthetic


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "--step-model"),
        ('{"bandwidth": 1}', "keys must be among"),
        ('{"bandwidth_efficiency": 0}', "bandwidth_efficiency must be in (0, 1]"),
        ("[1]", "keys must be among"),
    ],
)
def test_the_fake_server_refuses_bad_coefficients(
    capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    from bench.fidelity.cli import pacedserver_main as main

    with pytest.raises(SystemExit) as exc:
        main(["--step-model", value])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_the_step_model_server_records_the_models_times_not_its_late_writes() -> None:
    # A loaded machine fires the server's token timers late; what the server records (its log,
    # its histograms) is the time the model gave each token, the truth a fit is checked against.
    import json
    import urllib.request

    model = synthetic_model(TRUTH)
    server = PacedServer(0.1, 0.02, output_tokens=4, step_model=model)
    body = json.dumps({"prompt": "a b c", "max_tokens": 4, "stream": True}).encode()
    with serving_in_thread(server) as url:
        request = urllib.request.Request(url + "/v1/completions", data=body, method="POST")
        with urllib.request.urlopen(request) as r:
            assert r.read().count(b"data: ") == 6  # 4 tokens, usage, [DONE]
        with urllib.request.urlopen(url + "/timings") as r:
            (timing,) = json.load(r)["timings"]
    prompt = 4  # three words + 1
    point = model.at_concurrency(1.0, Workload(prompt, 4))
    ttft, step = point.engine_ttft_s, point.step_s
    assert timing["ttft_s"] == pytest.approx(ttft, rel=1e-9)
    assert timing["e2e_s"] == pytest.approx(ttft + 3 * step, rel=1e-9)
