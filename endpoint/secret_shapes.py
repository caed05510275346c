"""The one catalogue of credential shapes: each as its issuer issues it.

:data:`SHAPES` is shared by redaction (:mod:`endpoint.redact`) and detection (the
`no-plaintext-secrets` policy, :func:`find_secret`), so the two cannot drift. Each shape has its
whole-token pattern (masking removes the secret, not its first characters) and its prefix form
(a token cut short still goes), with optional checks (a JWT's header must be JSON with `alg`;
``hf_``/``sk-`` prefixes must read as random, not as `hf_transfer`). A credential of no issuer's
shape is found by where it goes (`policies/_sinks.py`); :func:`high_entropy` says whether such a
value reads as generated. Pure, bounded work (inputs cut to :data:`MAX_SCAN_CHARS`).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """A credential format, stated once for detection and redaction.

    `pattern` matches the whole credential (detection reports it; redaction masks it).
    `prefix` is its prefix form: the format's distinctive start and a few characters, matched
    to the end of the token, so a token cut short by someone else's bound is still masked
    (None: the start alone cannot be told from ordinary text, see the shape). `head` is the
    literal start that marks a fragment as the first part of a split credential
    (:func:`find_split_secret`; None: no distinctive start)."""

    label: str
    pattern: str
    prefix: str | None
    head: str | None
    whole_check: Callable[[str], bool] | None = None
    """Further test of a whole match (None: the pattern is enough)."""
    prefix_check: Callable[[str], bool] | None = None
    """Further test of a prefix-form match (None: the prefix pattern is enough)."""


_CUT_SEPARATORS = re.compile(r"[_\-.]")


def _token_body(body: str, min_chars: int = 8) -> bool:
    """Whether `body` (what follows a shape's start in a prefix form) reads as the random part
    of a token, not an identifier: at least `min_chars` characters of the token's charset
    (separators `_-.` left out), two of upper case, lower case and digits, and at least three
    changes of class between neighbours (`hf_transfer`, `hf_config_path`, `sk-learn-v2` have
    none or one; `hf_AbCdEfGh`, `sk-proj-a1B2c3D4` have many)."""
    core = _CUT_SEPARATORS.sub("", body)
    if len(core) < min_chars:
        return False
    kinds = sum(1 for test in (str.isupper, str.islower, str.isdigit) if any(map(test, core)))
    if kinds < 2:
        return False
    return sum(1 for a, b in itertools.pairwise(core) if _class(a) != _class(b)) >= 3


def _after(head: str) -> Callable[[str], bool]:
    pattern = re.compile(head)

    def check(match: str) -> bool:
        start = pattern.match(match)
        return start is not None and _token_body(match[start.end() :])

    return check


def _openai(match: str) -> bool:
    """A whole `sk-` key: a plain body of 20+ letters and digits is one; a body with separators
    (`sk-proj-...`) must read as random (`sk-proj-roadmap-notes-for-q3` does not)."""
    body = match[3:]
    body = re.sub(r"^(?:proj|svcacct|admin|ant)-", "", body)
    return not re.search(r"[_\-]", body) or _token_body(body)


def _b64url(text: str) -> bytes:
    text = text[: len(text) - len(text) % 4 if len(text) % 4 == 1 else len(text)]
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return b""


def _jose_header(part: str) -> bool:
    """Whether ``part`` decodes to a JSON object with `alg` (RFC 7515 section 4.1.1: the one
    member every JOSE header has)."""
    try:
        header = json.loads(_b64url(part).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(header, dict) and "alg" in header


def _jwt(match: str) -> bool:
    """A whole JSON Web Token: three dot-separated parts, the first a JOSE header."""
    parts = match.split(".")
    return len(parts) >= 3 and _jose_header(parts[0])


def _jwt_cut(match: str) -> bool:
    """A JSON Web Token cut short: its header, when whole (a `.` follows), is a JOSE header;
    when itself cut, it decodes as far as it goes to the start of a JSON object naming `alg`
    (or `typ`/`kid`, which may precede it); base64 of any other JSON
    (`eyJsb2dfbGV2ZWwi...`: `{"log_level"...`) is not a token."""
    header = match.split(".")[0]
    if "." in match:
        return _jose_header(header)
    data = _b64url(header[: len(header) - len(header) % 4])
    text = data.decode("utf-8", "ignore")
    return text.startswith("{") and re.search(r'"(?:alg|typ|kid)"', text) is not None


URL_HOST = (
    r"(?!(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?)(?![A-Za-z0-9.\-]))"
    r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.?)(?::[0-9]{1,5})?(?![\w\-:@%])"
)
"""The host (and port) after a URL's user-info, up to the end of the authority."""

#: Credential formats: each pattern spans the whole credential, each prefix form a credential
#: cut short after its start.
SHAPES: tuple[Shape, ...] = (
    Shape(
        "private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,20000}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]{0,20000})",
        # Any PEM or PGP block (a cut can leave the body of any of them), to its END line or
        # to the end of the text.
        r"-----BEGIN [A-Z0-9 ]{0,40}-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}-----|\Z)",
        "-----BEGIN",
    ),
    Shape(
        "service-account key",
        r"\"(?:private_key_id|private_key)\"\s*:\s*\"[^\"]{8,}\"",
        r"\"(?:private_key_id|private_key)\"\s*:\s*\"[^\"]{4,}",
        "private_key",
    ),
    # A JWT is three base64url parts whose first is a JSON header with `alg` (RFC 7519, 7515);
    # base64 of other JSON (`eyJ...` is `{"`) is judged by what it decodes to, not as a token.
    Shape(
        "JSON Web Token",
        r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]*){0,2}",
        "eyJ",
        _jwt,
        _jwt_cut,
    ),
    Shape(
        "Hugging Face token",
        r"(?<![A-Za-z0-9])(?:hf|api_org)_[A-Za-z0-9]{30,}",
        r"(?<![A-Za-z0-9])(?:hf|api_org)_[A-Za-z0-9]{6,}",
        "hf_|api_org_",
        None,
        _after(r"hf_|api_org_"),
    ),
    Shape(
        "Google API key",
        r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}",
        r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{4,}",
        "AIza",
    ),
    Shape(
        "Google OAuth access token",
        r"(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_.\-]{16,}",
        r"(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_.\-]{4,}",
        "ya29",
    ),
    Shape(
        "Google OAuth refresh token",
        r"(?<![A-Za-z0-9/])1//0[0-9A-Za-z_\-]{30,}",
        r"(?<![A-Za-z0-9/])1//0[0-9A-Za-z_\-]{4,}",
        "1//",
    ),
    Shape(
        "Google OAuth client secret",
        r"(?<![A-Za-z0-9])GOCSPX-[A-Za-z0-9_\-]{20,}",
        r"(?<![A-Za-z0-9])GOCSPX-[A-Za-z0-9_\-]{4,}",
        "GOCSPX",
    ),
    # OpenAI: `sk-` and 48 letters and digits (`sk-` + 20 + `T3BlbkFJ` + 20) for user keys;
    # `sk-proj-`, `sk-svcacct-`, `sk-admin-` and a longer body of `[A-Za-z0-9_-]` for project,
    # service-account and admin keys (gitleaks cmd/generate/config/rules/openai.go; GitHub
    # secret scanning's `openai_api_key`); Anthropic's `sk-ant-api03-...` shares the start.
    # The body is the issuer's charset with no separators for plain `sk-` keys, so identifiers
    # such as `sk-learn-pipeline-v2` are not keys; shorter bodies stay keys (a truncated key).
    Shape(
        "OpenAI-style API key",
        r"(?<![A-Za-z0-9])sk-(?:(?:proj|svcacct|admin|ant)-[A-Za-z0-9_\-]{20,}|[A-Za-z0-9]{20,}(?![\-]))",
        r"(?<![A-Za-z0-9])sk-(?:(?:proj|svcacct|admin|ant)-)?[A-Za-z0-9_\-]{8,}",
        "sk-",
        _openai,
        _after(r"sk-(?:(?:proj|svcacct|admin|ant)-)?"),
    ),
    Shape(
        "GitHub token",
        r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        r"(?<![A-Za-z0-9])(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{4,}",
        "gh[pousr]_|github_pat",
    ),
    # GitLab personal access token: `glpat-` and 20 characters (longer in newer releases).
    Shape(
        "GitLab token",
        r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{20,}",
        r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{4,}",
        "glpat-",
    ),
    Shape(
        "Slack token",
        r"(?<![A-Za-z0-9])xox[abeoprs]-[A-Za-z0-9\-]{10,}",
        r"(?<![A-Za-z0-9])xox[abeoprs]-[A-Za-z0-9\-]{4,}",
        "xox",
    ),
    # Slack app-level token: `xapp-<digit>-<id>-<digits>-<hex>`.
    Shape(
        "Slack app token",
        r"(?<![A-Za-z0-9])xapp-[0-9]-[A-Za-z0-9]+-[0-9]+-[A-Za-z0-9]{16,}",
        r"(?<![A-Za-z0-9])xapp-[A-Za-z0-9\-]{4,}",
        "xapp-",
    ),
    Shape(
        "Slack webhook",
        r"hooks\.slack\.com/services/T[A-Za-z0-9_]{6,}/B[A-Za-z0-9_]{6,}/[A-Za-z0-9_]{16,}",
        r"hooks\.slack\.com/services/T[A-Za-z0-9_/]{4,}",
        None,
    ),
    Shape(
        "AWS access key id",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Za-z0-9])",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{8,}",
        "AKIA|ASIA|ABIA|ACCA",
    ),
    Shape(
        "Stripe key",
        r"(?<![A-Za-z0-9])(?:sk|rk)_live_[A-Za-z0-9]{16,}",
        r"(?<![A-Za-z0-9])[rs]k_live_[A-Za-z0-9]{4,}",
        "sk_live|rk_live",
    ),
    # npm access token: `npm_` and 36 characters.
    Shape(
        "npm token",
        r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36,}",
        r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{16,}",
        "npm_",
    ),
    # PyPI API token: `pypi-` and a macaroon whose base64 starts with the issuer `pypi.org`.
    Shape(
        "PyPI token",
        r"(?<![A-Za-z0-9])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}",
        # every macaroon's base64 starts `AgE` (version 2 binary format), whichever index
        r"(?<![A-Za-z0-9])pypi-AgE[A-Za-z0-9_\-]{8,}",
        "pypi-AgE",
    ),
    # No prefix form: a URL cut before its `@` cannot be told from `host:port`; a whole
    # user-info is masked by the redaction's own URL rule as well. A password is one only in a
    # real authority (RFC 3986 section 3.2): `scheme://[user]:password@host[:port]`, a
    # non-empty password, then a host name or IP literal (not a digest algorithm such as the
    # `sha256` of `image:tag@sha256:...`) ending the authority.
    Shape(
        "password in a URL",
        r"(?<![A-Za-z0-9])[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^/\s:@?#\"']*:[^/\s:@?#\"'${}()]+@"
        + URL_HOST,
        None,
        None,
    ),
)

MAX_SCAN_CHARS = 200_000
"""Longest text examined per value (a startup script is a few KiB)."""
MIN_ENTROPY_LENGTH = 20
MAX_ENTROPY_LENGTH = 1024
MIN_ENTROPY = 3.6
MIN_CLASS_CHANGES = 0.45
MAX_WORD_SHARE = 0.3

_COMBINED = re.compile("|".join(f"(?P<s{i}>{s.pattern})" for i, s in enumerate(SHAPES)))
_CUT = re.compile("|".join(f"(?:{s.prefix})" for s in SHAPES if s.prefix))
_WHOLE = tuple(re.compile(s.pattern) for s in SHAPES)
_PREFIXES = tuple(re.compile(s.prefix) if s.prefix else None for s in SHAPES)
#: The token characters after a shape's match: masked with it.
_TOKEN_REST = re.compile(r"[A-Za-z0-9_\-]*")


def find_secret(text: str) -> str | None:
    """The label of the first credential shape in `text` as written, or None."""
    text = text[:MAX_SCAN_CHARS]
    if _COMBINED.search(text) is None:  # no shape's pattern anywhere: the common case
        return None
    for shape, pattern in zip(SHAPES, _WHOLE, strict=True):
        for match in pattern.finditer(text):
            if shape.whole_check is None or shape.whole_check(match.group()):
                return shape.label
    return None


def _class(ch: str) -> int:
    if ch.isdigit():
        return 0
    if ch.isupper():
        return 1
    if ch.islower():
        return 2
    return 3


_SEPARATORS = re.compile(r"[/+=_.\-]")
_WORD = re.compile(r"[a-z]{5,}|[A-Z]{5,}")
_NAME_SEGMENTS = re.compile(r"[-_./]")
_NAME_WORD = re.compile(r"[A-Za-z][a-z]{2,}")


def _reads_as_a_name(token: str) -> bool:
    """A name built of short tags (`gemma-4-12B-it-W4A16-g128-v2`): four or more segments
    between separators, none longer than 6 characters, one of them holding a word."""
    segments = [seg for seg in _NAME_SEGMENTS.split(token) if seg]
    return (
        len(segments) >= 4
        and all(len(seg) <= 6 for seg in segments)
        and any(_NAME_WORD.search(seg) for seg in segments)
    )


def high_entropy(token: str) -> bool:
    """Whether `token` (one run of key characters) reads as a generated key: 20 to 1024
    characters, two or more each of upper case, lower case and digits, at least
    :data:`MIN_ENTROPY` bits per character, mostly changing class between neighbours, few
    words. Used only where the destination says the value is a credential."""
    if not MIN_ENTROPY_LENGTH <= len(token) <= MAX_ENTROPY_LENGTH:
        return False
    core = _SEPARATORS.sub("", token)
    if len(core) < MIN_ENTROPY_LENGTH - 2 or _reads_as_a_name(token):
        return False
    classes = Counter(_class(c) for c in core)
    if min(classes[0], classes[1], classes[2]) < 2:
        return False
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    if entropy < MIN_ENTROPY:
        return False
    if sum(len(w) for w in _WORD.findall(core)) > MAX_WORD_SHARE * len(core):
        return False
    changes = sum(1 for a, b in itertools.pairwise(core) if _class(a) != _class(b))
    return changes / (len(core) - 1) >= MIN_CLASS_CHANGES


def secret_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every credential shape in `text` as written, for redaction to mask:
    whole, with the token characters that follow it, and by its prefix form where that reads
    as a token's random part. Overlapping spans are merged; sorted."""
    text = text[:MAX_SCAN_CHARS]
    spans: list[tuple[int, int]] = []
    if _COMBINED.search(text) is None and _CUT.search(text) is None:
        return spans
    for shape, whole, cut in zip(SHAPES, _WHOLE, _PREFIXES, strict=True):
        forms = [(whole, shape.whole_check)]
        if cut is not None:
            forms.append((cut, shape.prefix_check))
        for pattern, check in forms:
            for match in pattern.finditer(text):
                if check is None or check(match.group()):
                    end = match.end()
                    if shape.head is not None:  # a token: its whole run goes
                        rest = _TOKEN_REST.match(text, end)
                        end = rest.end() if rest else end
                    spans.append((match.start(), end))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
