"""Server histograms from a real Prometheus text exposition: deltas over a window."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench.load.server_metrics import (
    ServerHistogramsError,
    client_share,
    histogram_deltas,
    parse_histograms,
)
from tests.support.fake_vllm import MALFORMED_METRICS, ServerFactory

# vLLM's names, labels and buckets (vllm/v1/metrics/loggers.py), written by prometheus-client
# as vLLM writes them.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0)


class Exporter:
    def __init__(self, engines: tuple[str, ...] = ("0",), models: tuple[str, ...] = ("m",)):
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]

        def histogram(name: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, "doc", labels, buckets=buckets, registry=self.registry)

        self.ttft = histogram("vllm:time_to_first_token_seconds", TTFT_BUCKETS)
        self.itl = histogram("vllm:inter_token_latency_seconds", ITL_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", E2E_BUCKETS)
        for model in models:
            for engine in engines:
                for h in (self.ttft, self.itl, self.e2e):
                    h.labels(model, engine)

    def request(self, ttft: float, itls: list[float], model: str = "m", engine: str = "0"):
        self.ttft.labels(model, engine).observe(ttft)
        for x in itls:
            self.itl.labels(model, engine).observe(x)
        self.e2e.labels(model, engine).observe(ttft + sum(itls))

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def test_deltas_hold_exactly_the_requests_between_the_scrapes() -> None:
    e = Exporter()
    e.request(0.5, [0.2, 0.2])  # before the window: must not count
    before = parse_histograms(e.text())
    e.request(0.09, [0.02, 0.03])
    e.request(0.11, [0.02, 0.03])
    after = parse_histograms(e.text())
    d = histogram_deltas(before, after)
    ttft, itl, e2e = d["ttft"], d["itl"], d["e2el"]
    assert ttft is not None and itl is not None and e2e is not None
    assert ttft.count == 2 and ttft.sum == pytest.approx(0.20)
    assert ttft.mean == pytest.approx(0.10)
    assert itl.count == 4 and itl.mean == pytest.approx(0.025)
    assert e2e.mean == pytest.approx(0.15)
    buckets = dict(ttft.buckets)
    assert buckets[0.08] == 0 and buckets[0.1] == 1 and buckets[0.25] == 2
    assert buckets[float("inf")] == 2


def test_engines_are_summed_and_other_models_left_out() -> None:
    e = Exporter(engines=("0", "1"), models=("m", "other"))
    before = parse_histograms(e.text(), model_name="m")
    e.request(0.1, [0.02], engine="0")
    e.request(0.3, [0.04], engine="1")
    e.request(9.0, [1.0], model="other")
    d = histogram_deltas(before, parse_histograms(e.text(), model_name="m"))
    assert d["ttft"] is not None and d["ttft"].count == 2
    assert d["ttft"].mean == pytest.approx(0.2)


def test_a_restart_between_scrapes_gives_no_delta() -> None:
    e = Exporter()
    for _ in range(3):
        e.request(0.1, [0.02])
    before = parse_histograms(e.text())
    restarted = Exporter()
    restarted.request(0.1, [0.02])
    d = histogram_deltas(before, parse_histograms(restarted.text()))
    assert d == {"ttft": None, "itl": None, "e2el": None}


def test_missing_histograms_and_bad_text() -> None:
    assert parse_histograms("# nothing here\n") == {}
    assert histogram_deltas({}, {}) == {"ttft": None, "itl": None, "e2el": None}
    with pytest.raises(ServerHistogramsError):
        parse_histograms(MALFORMED_METRICS)


def test_fake_vllm_exposition_parses(fake_vllm: ServerFactory) -> None:
    import httpx

    server = fake_vllm(ttft_s=0.02, output_tokens=3)
    before = parse_histograms(httpx.get(server.url + "/metrics").text)
    httpx.post(
        server.url + "/v1/completions",
        json={"model": "google/gemma-4-12B-it", "prompt": "hi", "max_tokens": 3},
    )
    after = parse_histograms(httpx.get(server.url + "/metrics").text)
    d = histogram_deltas(before, after)
    assert d["ttft"] is not None and d["ttft"].count == 1
    assert d["e2el"] is not None and d["e2el"].count == 1


def test_client_share() -> None:
    assert client_share(110.0, 100.0) == pytest.approx(1 / 11)
    assert client_share(None, 100.0) is None
    assert client_share(100.0, None) is None
    assert client_share(0.0, 0.0) is None


def test_non_finite_values_give_no_delta() -> None:
    e = Exporter()
    before = parse_histograms(e.text())
    e.request(0.1, [0.02])
    text = e.text().replace(
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.1',
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} NaN',
    )
    assert "NaN" in text
    d = histogram_deltas(before, parse_histograms(text))
    assert d["ttft"] is None and d["itl"] is not None
