"""`gemma4 preview` never shows a credential a stack holds, never blocks a deploy on an
identifier that only starts like one, and tells a `secure:` value by its type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from endpoint.redact import MASK, redact
from gemma4 import preview as pv
from preview import build as pb
from preview.harness import ROOT
from tests.test_gemma4_preview import run, stack_file

HF = "hf_abcdefghijklmnopqrstuvwxyz0123456789"  # made up, in Hugging Face's format
LABELS = ["app=gemma4-vllm", "hardware=l4"]


@pytest.mark.parametrize("form", ["", "--json", "--markdown"])
@pytest.mark.parametrize("label", [f"team={HF}", "org=api_org_" + HF[3:]])
def test_a_credential_in_a_label_is_reported_and_never_shown(
    form: str, label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(tmp_path, "leak", labels=[*LABELS, label])
    code, out, err = run(capsys, "--stack-file", str(path), "-s", "leak", *[f for f in [form] if f])
    assert code == 1  # no-plaintext-secrets is mandatory
    assert "no-plaintext-secrets" in out
    value = label.split("=", 1)[1]
    assert value not in out + err and value[3:12] not in out + err
    assert MASK in out
    if form == "--json":
        json.loads(out)  # still a JSON document


def test_an_identifier_that_starts_like_a_key_does_not_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = [*LABELS, "team=sk-learn-pipeline-v2", "cache=hf_transfer"]
    path = stack_file(tmp_path, "ok", labels=labels)
    code, out, _ = run(capsys, "--stack-file", str(path), "-s", "ok")
    assert code == 0, out
    assert "team = sk-learn-pipeline-v2" in out and "cache = hf_transfer" in out


def test_an_error_message_is_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(f"config:\n  gemma4-vllm:labels: {HF}\n")  # echoed in the message
    code, out, err = run(capsys, "--stack-file", str(path), "-s", "bad")
    assert code == 2 and err.startswith("gemma4 preview: error:")
    assert "labels" in err and MASK in err
    assert HF not in out + err and HF[3:12] not in out + err


def test_a_plain_value_that_reads_like_the_placeholder_is_a_plain_value(tmp_path: Path) -> None:
    path = stack_file(tmp_path, "plain", **{"gcp:project": pb.SECRET_PLACEHOLDER})
    project, other = pb.read_stack_file(path)
    assert other["gcp:project"] == pb.SECRET_PLACEHOLDER
    assert pb.secure_keys_read(project, other) == []
    secure = stack_file(tmp_path, "enc", **{"gcp:project": {"secure": "v1:c2VjcmV0"}})
    project, other = pb.read_stack_file(secure)
    assert other["gcp:project"] == pb.SECRET_PLACEHOLDER  # shown the same way
    assert pb.secure_keys_read(project, other) == ["gcp:project"]


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "tpu-v6e1", "gke-l4", "gke-tpu-v6e"])
def test_redaction_hides_nothing_of_a_shipped_stack(stack: str) -> None:
    """Secret names, selectors and `Bearer ${token}` references are configuration, not
    credentials: the preview of every shipped stack is shown whole."""
    p = pb.build_preview(stack, ROOT / f"Pulumi.{stack}.yaml")
    for text in (json.dumps(p.model_dump(mode="json")), pv.markdown(p)):
        assert MASK not in redact(text, limit=None, by_name=False)


@pytest.mark.parametrize("command", [["plan"], ["preview", "-s", "bad"]])
def test_a_credential_in_a_bad_value_is_not_echoed_by_any_command(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemma4.cli import main

    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(f"config:\n  gemma4-vllm:labels: {HF}\n  gemma4-vllm:maxNumSeqs: {HF}\n")
    code = main([*command, "--stack-file", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and "labels" in err and MASK in err
    assert HF not in out + err and HF[3:12] not in out + err


@pytest.mark.parametrize("form", ["", "--json", "--markdown"])
def test_a_secret_input_is_shown_as_pulumi_shows_it(
    form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The collector's config is a secret input (secretData): `[secret]`, as `pulumi preview`
    shows it, never the engine's marker and never its plaintext."""
    from pulumi.runtime import rpc

    assert (rpc._special_sig_key, rpc._special_secret_sig) == (pb.SIG_KEY, pb.SECRET_SIG)
    code, out, _ = run(capsys, "-s", "l4", *[f for f in [form] if f])
    assert code == 0
    assert pb.SIG_KEY not in out and pb.SECRET_SIG not in out
    assert "RunMonitoring" not in out  # the plaintext of the secret input
    if form == "--json":
        (version,) = [
            r for r in json.loads(out)["resources"] if r["type"].endswith("SecretVersion")
        ]
        assert version["inputs"]["secretData"] == "[secret]"
    elif not form:
        assert "secretData = [secret]" in out


def test_secrets_are_found_at_any_depth() -> None:
    assert pb.shown_secrets({"a": [{pb.SIG_KEY: pb.SECRET_SIG, "value": "x"}], "b": 1}) == {
        "a": ["[secret]"],
        "b": 1,
    }
