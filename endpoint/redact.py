"""The one redaction step: every server body, error message or URL that reaches a screen, a log,
a Pulumi hook message or a file passes through :func:`redact` first.

It masks the credentials this process sends (registered with :func:`register_secret`), also
percent-encoded, JSON-escaped or inside a base64 run, so a server that reflects the key does
not get it printed; ``Bearer``/``Basic`` and ``Authorization`` values (not ``Bearer ${token}``);
named query and JSON values (``key=``, ``token=``, ``"password": ...``); every credential shape
of :data:`endpoint.secret_shapes.SHAPES`, whole or cut short; URL user-info; secret options of a
command line (``--api-key KEY``); AWS secret keys after their name.

The text is redacted whole, *then* cut to ``limit`` characters, so no cut reveals part of a
secret; control characters are replaced, so a hostile server cannot move the cursor. Work is
bounded: past ``limit x 4`` characters the input is not scanned, and the scanned part ends
before any token or start of a known secret it cuts.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from urllib.parse import quote, quote_plus

from endpoint.secret_shapes import URL_HOST, secret_spans

__all__ = ["MASK", "redact", "register_secret"]

MASK = "[REDACTED]"
_MIN_SECRET_LEN = 6
_SCAN_FACTOR = 4
"""Only the first ``limit x _SCAN_FACTOR`` characters are scanned (bounded work per call)."""

_secrets: set[str] = set()
_encoded: set[str] = set()
"""Base64 forms of registered secrets (the part fixed by the secret's bytes at each of the three
alignments, standard and URL-safe): the whole base64 run holding one is masked, so a secret
reflected inside `Basic base64(user:secret)` or any base64 blob goes too."""
_lock = threading.Lock()
_B64_CHARS = "A-Za-z0-9+/_\\-"
_MIN_B64_CORE = 8


def _text_forms(value: str) -> set[str]:
    """`value` as it appears once percent-encoded (path, query, form) or inside a JSON string."""
    forms = {
        quote(value, safe=""),
        quote(value, safe="/"),
        quote_plus(value, safe=""),
        quote_plus(value, safe="/"),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        # Go's encoding/json also escapes <, > and & (HTML safety)
        json.dumps(value)[1:-1]
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026"),
    }
    return {f for f in forms if f != value and len(f) >= _MIN_SECRET_LEN}


def _base64_cores(value: str) -> set[str]:
    data = value.encode()
    cores: set[str] = set()
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + data).decode("ascii")
        start = -(-pad * 8 // 6)
        core = encoded[start : (pad + len(data)) // 3 * 4]
        if len(core) >= _MIN_B64_CORE:
            cores.add(core)
            cores.add(core.translate(str.maketrans("+/", "-_")))
    return cores


_URL_USERINFO = re.compile(rf"(?i)\b([a-z][a-z0-9+.\-]{{0,20}}://)[^/\s?#@]*@(?={URL_HOST})")
_SCHEME_CREDENTIAL = re.compile(
    r"(?i)\b(bearer)(\s+)[A-Za-z0-9\-._~+/=:]+|\b(basic)(\s+)[A-Za-z0-9+/=]{8,}"
)
_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|x-goog-api-key)"
    r"([\"']?\s*[:=]\s*[\"']?)(?!(?:[A-Za-z]+\s+)?\$[({A-Za-z_])([^\s\"',}][^\"'\r\n,}]*)"
)
"""A credential header's value, unless it is a shell or Cloud Run reference (`Bearer ${token}`,
`$(TOKEN)`): the text names where the value comes from, not the value."""
_NAMES = (
    r"api[_-]?key|apikey|key|access[_-]?token|id[_-]?token|refresh[_-]?token|token|secret|"
    r"client[_-]?secret|password|passwd|sig|signature"
)
_NAMED_EQ = re.compile(rf"(?i)(?<![A-Za-z0-9_])({_NAMES})=(?!\[REDACTED\])([^\s\"'&,;}}<>]+)")
_NAMED_JSON = re.compile(rf"(?i)([\"'])({_NAMES})\1(\s*:\s*)([\"'])(?!\[REDACTED\])([^\"'\r\n]*)\4")
_AWS_SECRET = re.compile(
    r"(?i)(aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\])[A-Za-z0-9/+=]{8,}"
)
_OPTION = re.compile(
    r"(?i)((?<![\w-])--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|(?:access[-_]|auth[-_]|id[-_])?token|"
    r"password|passphrase|client[-_]secret|secret)(?:=|\s+))(?!\[)"
    r"(?:\"[^\"]*\"?|'[^']*'?|[^\s\"']+)"
)
_ENV_ASSIGN = re.compile(
    r"(?<![\w-])([A-Za-z][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSPHRASE|CREDENTIALS?)=)"
    r"(?!\[)(?:\"[^\"]*\"?|'[^']*'?|[^\s\"']+)"
)
"""A shell assignment of a secret-named variable (``VLLM_API_KEY=...``, ``HF_TOKEN=...``)."""
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-.+/=~]+\Z")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x1b]")


def _scheme(match: re.Match[str]) -> str:
    name = match.group(1) or match.group(3)
    space = match.group(2) or match.group(4)
    return f"{name}{space}{MASK}"


def _without_cut_secret(s: str, known: list[str]) -> str:
    """``s``, a text cut short, without the part of a secret the cut may have split: a trailing
    run of token characters, and a trailing start of a known secret (which may hold spaces)."""
    s = _TOKEN_TAIL.sub("", s)
    for secret in known:
        for length in range(min(len(secret) - 1, len(s)), 2, -1):
            if s.endswith(secret[:length]):
                return s[:-length]
    return s


def _mask(s: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return s
    out: list[str] = []
    last = 0
    for start, end in spans:
        out += [s[last:start], MASK]
        last = end
    out.append(s[last:])
    return "".join(out)


def register_secret(value: str | None) -> None:
    """Remember ``value`` (a key or token this process sends) so that :func:`redact` removes it
    wherever it appears. Values shorter than 6 characters are not registered (they would
    mask ordinary words); such a key is still masked after ``Bearer``."""
    if value is None:
        return
    value = value.strip()
    if len(value) < _MIN_SECRET_LEN:
        return
    with _lock:
        _secrets.add(value)
        _secrets.update(_text_forms(value))
        _encoded.update(_base64_cores(value))


def redact(text: object, *, limit: int | None = 2000, by_name: bool = True) -> str:
    """``text`` (``str()`` of it) with every secret replaced and cut to ``limit`` characters
    (``None``: no cut); see the module docstring. Idempotent.

    ``by_name=False`` leaves out the rules that mask a value for its name alone (``key=``,
    ``"secret": ...``, ``--token ...``, ``..._KEY=...``, ``aws_secret_access_key=``): for text
    that names configuration (a preview of resources, where ``"key": "nvidia.com/gpu"`` and
    ``"secret": "hf-token"`` are a selector and a Secret Manager name), the values are judged
    as :func:`endpoint.secret_shapes.find_secret` judges them, by what they are."""
    s = text if isinstance(text, str) else str(text)
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
        encoded = sorted(_encoded, key=len, reverse=True)
    if limit is not None and len(s) > limit * _SCAN_FACTOR:
        s = _without_cut_secret(s[: limit * _SCAN_FACTOR], known)
    for secret in known:
        if secret in s:
            s = s.replace(secret, MASK)
    for core in encoded:
        if core in s:
            s = re.sub(f"[{_B64_CHARS}]*{re.escape(core)}[{_B64_CHARS}]*=*", MASK, s)
    s = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", s)
    s = _SCHEME_CREDENTIAL.sub(_scheme, s)
    s = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", s)
    if by_name:
        s = _NAMED_EQ.sub(lambda m: f"{m.group(1)}={MASK}", s)
        s = _NAMED_JSON.sub(
            lambda m: (
                f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{m.group(4)}{MASK}{m.group(4)}"
            ),
            s,
        )
    s = _mask(s, secret_spans(s))
    if by_name:
        s = _AWS_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", s)
        s = _OPTION.sub(lambda m: f"{m.group(1)}{MASK}", s)
        s = _ENV_ASSIGN.sub(lambda m: f"{m.group(1)}{MASK}", s)
    s = _CONTROL.sub("?", s)
    if limit is not None and len(s) > limit:
        s = s[: max(0, limit - 1)] + "…"
    return s
