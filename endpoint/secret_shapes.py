"""The one catalogue of credential shapes, and the detector that looks at values, not names.

:data:`SHAPES` is shared by redaction (:mod:`endpoint.redact` masks every match) and detection
(the `no-plaintext-secrets` policy reports every value in which :func:`find_secret` finds one),
so the two cannot drift. Each shape states its whole-token pattern (a PEM block to its END
line), so masking a match removes the secret, not its first characters, and its prefix form
(the format's start and a few characters), which redaction also masks, so a token cut short
by some other bound still goes. A shape may add a test of a match (`whole_check`,
`prefix_check`): a JWT's header must be JSON with `alg`; the prefix forms of `hf_` and `sk-`
must read as a token's random part, not as an identifier (`hf_transfer`). Redaction masks
what :func:`secret_spans` returns: the same judgement as :func:`find_secret`, located.

:func:`find_secret` looks at a value as written and at its decoded forms (base64, URL-safe
base64, hex, percent-encoding, gzip inside any of those; nested up to :data:`MAX_DECODE_DEPTH`
layers), written backwards, and at high-entropy strings of credential length.
:func:`find_split_secret` tries the concatenations of pairs of short fragments (environment
values, shell assignments, `--option=value` arguments), and of a fragment holding a shape's
start with two more (:data:`MAX_TRIPLES` joins at most), which is how a token split across
variables and joined at run time is found. A password in a URL's user-info
(`scheme://user:password@host`, with a non-empty password and a real host after it) is a shape
of its own.

High entropy: a run of `[A-Za-z0-9+/_-]` (and its `=` padding) of 20 to 1024 characters whose
Shannon entropy is at least :data:`MIN_ENTROPY` bits per character and which, separators
`/+=_.-` left out, holds at least two upper-case letters, two lower-case letters and two digits,
changes character class between neighbours at least :data:`MIN_CLASS_CHANGES` of the time and
has at most :data:`MAX_WORD_SHARE` of its letters in same-case runs of five or more (words).
Hexadecimal strings (digests, commit shas), Subresource Integrity digests
(`sha256-`/`sha384-`/`sha512-` and the base64 of that algorithm's digest length,
:func:`is_digest`), UUIDs, lower-case names (buckets, services, images) and identifiers made of
words (`google/gemma-4-12B-it-qat-w4a16-ct`) do not qualify; most random keys in base62 or
base64 do (about 80% at 20 characters, 95% at 40: a heuristic, on top of the exact shapes). A
run that decodes to text is judged by its text instead.

Pure: no I/O, bounded work (every input is cut to :data:`MAX_SCAN_CHARS`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import gzip
import io
import itertools
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = [
    "SHAPES",
    "Shape",
    "TooManyFragments",
    "find_secret",
    "find_split_secret",
    "high_entropy",
    "is_digest",
    "prefix_pattern",
    "secret_pattern",
    "secret_spans",
]


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


def _jwt(match: str) -> bool:
    """A whole JSON Web Token: three dot-separated parts, the first a JSON object with `alg`
    (RFC 7515 section 4.1.1: the one member every JOSE header has)."""
    parts = match.split(".")
    if len(parts) < 3:
        return False
    try:
        header = json.loads(_b64url(parts[0]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(header, dict) and "alg" in header


def _jwt_cut(match: str) -> bool:
    """A JSON Web Token cut short: its header, when whole (a `.` follows), is a JSON object
    with `alg`; when itself cut, it decodes as far as it goes to the start of a JSON object
    naming `alg` (or `typ`/`kid`, which may precede it); base64 of any other JSON
    (`eyJsb2dfbGV2ZWwi...`: `{"log_level"...`) is not a token."""
    header = match.split(".")[0]
    if "." in match:  # the header is whole: it must be one with `alg`
        try:
            decoded = json.loads(_b64url(header).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return False
        return isinstance(decoded, dict) and "alg" in decoded
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
        r"(?<![\w/])1//0[0-9A-Za-z_\-]{30,}",
        r"(?<![\w/])1//0[0-9A-Za-z_\-]{4,}",
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
MAX_DECODE_DEPTH = 3
"""Encodings peeled off one inside another (base64 of gzip of hex ...)."""
MAX_DECODED_BYTES = 1 << 20
"""Largest decompressed form examined (a gzip bomb stops here)."""
MAX_CANDIDATES = 256
"""Encoded runs looked at per text."""
MAX_DECODINGS = 1024
"""Decodings tried per value, all layers together."""
MAX_WORK_CHARS = 4 * MAX_SCAN_CHARS
"""Characters decoded per value, all layers together."""
MIN_ENTROPY_LENGTH = 20
MAX_ENTROPY_LENGTH = 1024
MIN_ENTROPY = 3.6
MIN_CLASS_CHANGES = 0.45
MAX_WORD_SHARE = 0.3
"""Largest share of a high-entropy string in same-case letter runs of 5 or more (words)."""
MAX_PIECES = 1024
"""Fragments a resource may hold (more: :class:`TooManyFragments`)."""
MAX_HEADS = 256
"""Fragments holding the start of a shape, each paired with every fragment (more:
:class:`TooManyFragments`)."""
MAX_FRAGMENTS = 64
"""Fragments paired by :func:`find_split_secret` (the most token-like first)."""
MAX_TRIPLES = 65_536
"""Three-fragment joins tried per resource (a shape's start, then two of the most token-like
fragments)."""

_COMBINED = re.compile("|".join(f"(?P<s{i}>{s.pattern})" for i, s in enumerate(SHAPES)))
_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}=*")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){8,}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_BASE32 = re.compile(r"[A-Z2-7]{16,}=*")
_WRAPPED = re.compile(r"[A-Za-z0-9+/=_\-\s]{16,}")
_SEPARATED_HEX = re.compile(r"(?:(?:0x)?[0-9a-fA-F]{2}(?:[:,;\-]\s*|\s+)){8,}(?:0x)?[0-9a-fA-F]{2}")
_HTML_ENTITY = re.compile(r"&#(?:([0-9]{1,7})|[xX]([0-9a-fA-F]{1,6}));")
_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|([0-7]{3}))")
_PREFIX = re.compile("|".join(s.head for s in SHAPES if s.head))
"""The start of any shape (a fragment holding one may be a split credential's first part)."""
_CUT = re.compile("|".join(f"(?:{s.prefix})" for s in SHAPES if s.prefix))
_TOKENISH = re.compile(r"[A-Za-z0-9+/=_.\-]{2,512}")


def secret_pattern() -> re.Pattern[str]:
    """One compiled pattern matching any shape's whole pattern of :data:`SHAPES`: candidates,
    before a shape's `whole_check` (mask with :func:`secret_spans`, which applies it)."""
    return _COMBINED


def prefix_pattern() -> re.Pattern[str]:
    """One compiled pattern matching the prefix form of any shape of :data:`SHAPES`: a
    credential cut short after its start; candidates, before a shape's `prefix_check` (mask
    with :func:`secret_spans`, which applies it)."""
    return _CUT


_WHOLE = tuple(re.compile(s.pattern) for s in SHAPES)
_PREFIXES = tuple(re.compile(s.prefix) if s.prefix else None for s in SHAPES)


def _shape(text: str) -> str | None:
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
    """A name built of short tags (`gemma-4-12B-it-W4A16-g128-v2`, `acme/Gemma4-12B-FT-v2`):
    four or more segments between separators, none longer than 6 characters, one of them
    holding a word. Random credentials come in long runs; grouped keys such as
    `ABCD-EFGH-IJKL-MNOP` hold no word and are still judged."""
    segments = [seg for seg in _NAME_SEGMENTS.split(token) if seg]
    return (
        len(segments) >= 4
        and all(len(seg) <= 6 for seg in segments)
        and any(_NAME_WORD.search(seg) for seg in segments)
    )


def high_entropy(token: str) -> bool:
    """Whether `token` (one run of key characters) reads as a random credential."""
    if not MIN_ENTROPY_LENGTH <= len(token) <= MAX_ENTROPY_LENGTH:
        return False
    core = _SEPARATORS.sub("", token)
    if len(core) < MIN_ENTROPY_LENGTH - 2:
        return False
    if _reads_as_a_name(token):
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


def _printable(data: bytes) -> str | None:
    """`data` as text when it is text (UTF-8, few control characters), else None."""
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
                data = f.read(MAX_DECODED_BYTES)
        except (OSError, EOFError, zlib.error):
            return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text:
        return None
    odd = sum(1 for c in text if (ord(c) < 32 and c not in "\t\r\n") or ord(c) == 127)
    return text if odd <= len(text) // 50 else None


def _decodings(run: str) -> Iterable[bytes]:
    stripped = run.rstrip("=")
    if _HEX.fullmatch(run):
        with contextlib.suppress(ValueError):
            yield bytes.fromhex(run)
        return
    if _BASE32.fullmatch(run):
        with contextlib.suppress(binascii.Error, ValueError):
            yield base64.b32decode(stripped + "=" * (-len(stripped) % 8))
    if len(stripped) % 4 == 1:
        return
    padded = stripped + "=" * (-len(stripped) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            yield decode(padded.encode("ascii"))
        except (binascii.Error, ValueError):
            continue


class _Work:
    """What one search may still spend: decodings tried, characters scanned."""

    def __init__(self) -> None:
        self.decodings = MAX_DECODINGS
        self.chars = MAX_WORK_CHARS

    def spend(self, chars: int) -> bool:
        self.decodings -= 1
        self.chars -= chars
        return self.decodings >= 0 and self.chars >= 0


#: Longest text whose verdict is kept (most values are short: names, labels, flags), and how
#: many are kept: a preview judges the same values in several policies, and a process that
#: previews again (the MCP server, a test) judges them again; at most 32 MiB of texts are held.
_CACHED_CHARS = 2048
_CACHED_TEXTS = 16384


def _find(text: str, depth: int, entropy: bool = True, work: _Work | None = None) -> str | None:
    if depth == 0 and work is None and len(text) <= _CACHED_CHARS:
        # A whole search from the top is a pure function of the text: the same verdict.
        return _find_cached(text, entropy)
    return _scan(text, depth, entropy, work)


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _find_cached(text: str, entropy: bool) -> str | None:
    return _scan(text, 0, entropy, None)


def _scan(text: str, depth: int, entropy: bool, work: _Work | None) -> str | None:
    work = work or _Work()
    text = text[:MAX_SCAN_CHARS]
    label = _shape(text)
    if label:
        return label
    label = _shape(text[::-1])
    if label:
        return f"{label} (reversed)"
    if depth < MAX_DECODE_DEPTH:
        for decoded in _whole_decodings(text):
            if not work.spend(len(decoded)):
                break
            found = _find(decoded, depth + 1, entropy, work)
            if found:
                return _decoded(found)
    for index, match in enumerate(_RUN.finditer(text)):
        if index >= MAX_CANDIDATES:
            break
        run = match.group()
        decoded_text = None
        if depth < MAX_DECODE_DEPTH and work.spend(len(run)):
            for data in _decodings(run):
                decoded_text = _printable(data)
                if decoded_text is not None:
                    break
        if decoded_text is not None:
            found = _find(decoded_text, depth + 1, entropy, work)
            if found:
                return _decoded(found)
            continue
        for piece in re.split(r"[=]+(?=.)", run):
            if entropy and not is_digest(piece) and high_entropy(piece):
                return "high-entropy string of credential length"
    return None


_DIGEST = re.compile(r"(sha1|sha224|sha256|sha384|sha512|md5)[-_]([A-Za-z0-9+/_\-]+={0,2})")
_DIGEST_BYTES = {"sha1": 20, "sha224": 28, "sha256": 32, "sha384": 48, "sha512": 64, "md5": 16}


def is_digest(piece: str) -> bool:
    """Whether `piece` is a digest written the Subresource Integrity way: an algorithm, `-`,
    and the base64 of exactly that algorithm's digest length (`sha256-` + 32 bytes,
    `sha384-` + 48, `sha512-` + 64; URL-safe base64 too). Hexadecimal digests (`sha256:` of
    OCI images, commit shas) never qualify as high entropy (no mixed case)."""
    match = _DIGEST.fullmatch(piece)
    if match is None:
        return False
    body = match.group(2).rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    try:
        data = base64.b64decode(padded.translate(str.maketrans("-_", "+/")), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(data) == _DIGEST_BYTES[match.group(1)]


def _whole_decodings(text: str) -> Iterable[str]:
    """Decodings of the whole text: percent-encoding, shell/C escapes (`\\x68`, `\\u0068`,
    `\\150`), HTML character references (`&#104;`, `&#x68;`), hex bytes with separators
    (`68:66:5f`, `0x68, 0x66`), and base64 wrapped over several lines (as `base64` prints
    it)."""
    if _PERCENT.search(text):
        unquoted = unquote(text)
        if unquoted != text:
            yield unquoted
    if _ESCAPE.search(text):
        yield _ESCAPE.sub(_unescape, text)
    if _HTML_ENTITY.search(text):
        yield _HTML_ENTITY.sub(_entity, text)
    for match in itertools.islice(_SEPARATED_HEX.finditer(text), MAX_CANDIDATES):
        pairs = re.findall(r"(?:0x)?([0-9a-fA-F]{2})", match.group())
        decoded = _printable(bytes.fromhex("".join(pairs)))
        if decoded is not None:
            yield decoded
    if any(c.isspace() for c in text.strip()):
        for block in _WRAPPED.findall(text):
            compact = "".join(block.split())
            if len(compact) >= 16 and compact != block:
                for data in _decodings(compact):
                    decoded = _printable(data)
                    if decoded is not None:
                        yield decoded
                        break


def _entity(match: re.Match[str]) -> str:
    decimal, hexadecimal = match.groups()
    code = int(decimal) if decimal else int(hexadecimal, 16)
    return chr(code) if code < 0x110000 else "?"


def _unescape(match: re.Match[str]) -> str:
    hex2, hex4, octal = match.groups()
    code = int(hex2 or hex4, 16) if (hex2 or hex4) else int(octal, 8)
    return chr(code)


def _decoded(label: str) -> str:
    return label if label.endswith("(encoded)") else f"{label} (encoded)"


def find_secret(text: str) -> str | None:
    """The kind of credential found in `text` (as written or in a decoded form), or None."""
    return _find(text, 0)


def fragments(texts: Iterable[str], limit: int | None = MAX_FRAGMENTS) -> list[str]:
    """The pieces a secret may have been split into: short token-like values and the values of
    shell assignments (`NAME=value`, `export NAME="value"`) inside longer texts; the `limit`
    most token-like first (None: all, up to :data:`MAX_PIECES`)."""
    found: list[str] = []
    for text in texts:
        text = text[:MAX_SCAN_CHARS]
        for match in _OPTION_VALUE.finditer(text):
            if _TOKENISH.fullmatch(match.group(1)):
                found.append(match.group(1))
        if _TOKENISH.fullmatch(text):
            found.append(text)
            continue
        for match in _ASSIGNMENT.finditer(text):
            value = next((g for g in match.groups()[1:] if g), "")
            if _TOKENISH.fullmatch(value):
                found.append(value)
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda s: (-_score(s), s))
    return unique if limit is None else unique[:limit]


_ASSIGNMENT = re.compile(
    r"(?:^|[\s;&|(])(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?"
    r"([A-Za-z_][A-Za-z0-9_]*)=(?:\"([^\"$`\\]*)\"|'([^']*)'|([^\s;&|\"'$`\\()]*))"
)


_OPTION_VALUE = re.compile(r"(?:^|\s)--?[A-Za-z][A-Za-z0-9_.\-]*=([^\s\"'$`\\;&|()]+)")
"""The value of a command-line option written `--name=value` (a fragment of its own)."""


def _score(fragment: str) -> int:
    return sum(1 for c in set(fragment) if c.isalnum())


class TooManyFragments(ValueError):
    """More literal fragments than can all be paired: the check refuses rather than guess."""

    def __init__(self, fragments: int, heads: int) -> None:
        super().__init__(
            f"{fragments} short literal values ({heads} holding the start of a credential "
            f"shape); at most {MAX_PIECES} ({MAX_HEADS}) can be checked for a credential split "
            "across them"
        )


def find_split_secret(texts: Iterable[str]) -> tuple[str, str, str] | None:
    """(kind, first, second) when two fragments of `texts` (see :func:`fragments`) joined in
    either order hold a credential shape (as written or decoded) that neither holds alone;
    else None. Entropy alone is not judged on joined pairs (two ids side by side look random).

    Every fragment that holds the start of a shape (`hf_`, `AIza`, `-----BEGIN`, ...; up to
    :data:`MAX_HEADS`) is paired with every other fragment (up to :data:`MAX_PIECES`) against the
    shapes, so decoys cannot push the first half out: a resource with more fragments than that
    raises :class:`TooManyFragments` (the policy reports it) instead of being half-checked;
    the :data:`MAX_FRAGMENTS` most token-like fragments are also paired with each other (a split
    encoded token has no such start)."""
    texts = list(texts)
    every = fragments(texts, None)
    heads_found = sum(1 for p in every if _PREFIX.search(p))
    if len(every) > MAX_PIECES or heads_found > MAX_HEADS:
        raise TooManyFragments(len(every), heads_found)
    alone = {p for p in every if _find(p, 0, entropy=False)}
    rest = [p for p in every if p not in alone]
    heads = [p for p in rest if _PREFIX.search(p)]
    for a in heads:
        for b in rest:
            if b is not a:
                label = _shape(a + b)
                if label:
                    return label, a, b
    top = [p for p in fragments(texts) if p not in alone]
    for a in top:
        for b in top:
            if b is not a:
                label = _find(a + b, 0, entropy=False)
                if label:
                    return label, a, b
    if heads:
        width = min(len(rest), math.isqrt(MAX_TRIPLES // len(heads)))
        tails = rest[:width]  # `every` is sorted most token-like first
        for a in heads:
            for b in tails:
                if b is a:
                    continue
                for c in tails:
                    if c is not a and c is not b:
                        label = _shape(a + b + c)
                        if label:
                            return label, a, f"{b} + {c}"
    return None


_REFERENCE = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|\(([A-Za-z_][A-Za-z0-9_]*)\)|([A-Za-z_][A-Za-z0-9_]*))"
)


def variables(texts: Iterable[str]) -> dict[str, str]:
    """Literal values of shell assignments (`NAME=value`, `export NAME="value"`) in `texts`."""
    found: dict[str, str] = {}
    for text in texts:
        for match in _ASSIGNMENT.finditer(text[:MAX_SCAN_CHARS]):
            found.setdefault(match.group(1), next((g for g in match.groups()[1:] if g), ""))
    return found


def _expand(text: str, known: dict[str, str]) -> tuple[str, list[str]]:
    names: list[str] = []

    def value(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        if name not in known:
            return match.group()
        names.append(name)
        return known[name]

    return _REFERENCE.sub(value, text), list(dict.fromkeys(names))


def find_joined_secret(texts: Iterable[str], known: dict[str, str]) -> tuple[str, list[str]] | None:
    """(kind, variable names) when a text that references variables (`$A$B`, `${A}_${B}`,
    `"hf_$A"`, Cloud Run's `$(A)$(B)`) holds a credential shape once each reference is replaced
    by the variable's literal value (`known`: environment values and shell assignments), and
    does not hold one as written; else None."""
    for text in texts:
        text = text[:MAX_SCAN_CHARS]
        expanded, names = _expand(text, known)
        if not names or _find(text, 0, entropy=False):
            continue
        label = _find(expanded[:MAX_SCAN_CHARS], 0, entropy=False)
        if label:
            return label, names
    return None


_TOKEN_REST = re.compile(r"[A-Za-z0-9_\-]*")
"""Token characters after a shape's match: masked with it, so no tail of a token is shown."""
_MASK_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}=*")
_PERCENT_BYTE = re.compile(r"%([0-9A-Fa-f]{2})")


def _percent(match: re.Match[str]) -> str:
    return chr(int(match.group(1), 16))


_MAPPED_DECODINGS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("%", _PERCENT_BYTE, _percent),
    ("\\", _ESCAPE, _unescape),
    ("&#", _HTML_ENTITY, _entity),
)
"""Encodings that replace each escape in place (percent-encoding, backslash escapes, HTML
character references): decoded with a map back to the text, so what is found in the decoding
is masked where it was written."""


def _mapped(
    text: str, pattern: re.Pattern[str], decode: Callable[[re.Match[str]], str]
) -> tuple[str, list[int]]:
    """(`text` with each match of `pattern` decoded, the index in `text` where each character
    of the decoding starts; one more entry: the end)."""
    out: list[str] = []
    starts: list[int] = []
    last = 0
    for match in pattern.finditer(text):
        for index in range(last, match.start()):
            out.append(text[index])
            starts.append(index)
        for ch in decode(match):
            out.append(ch)
            starts.append(match.start())
        last = match.end()
    for index in range(last, len(text)):
        out.append(text[index])
        starts.append(index)
    starts.append(len(text))
    return "".join(out), starts


def _plain_spans(text: str) -> list[tuple[int, int]]:
    spans = list(_shape_spans(text, prefixes=True))
    size = len(text)
    spans += [(size - end, size - start) for start, end in _shape_spans(text[::-1], False)]
    for match in _MASK_RUN.finditer(text):
        if _find(match.group(), 0):
            spans.append(match.span())
    return spans


def _shape_spans(text: str, prefixes: bool) -> Iterator[tuple[int, int]]:
    if _COMBINED.search(text) is None and not (prefixes and _CUT.search(text)):
        return
    for shape, whole, cut in zip(SHAPES, _WHOLE, _PREFIXES, strict=True):
        forms = [(whole, shape.whole_check)]
        if prefixes and cut is not None:
            forms.append((cut, shape.prefix_check))
        for pattern, check in forms:
            for match in pattern.finditer(text):
                if check is None or check(match.group()):
                    end = match.end()
                    if shape.head is not None:  # a token: its whole run goes
                        rest = _TOKEN_REST.match(text, end)
                        end = rest.end() if rest else end
                    yield match.start(), end


def secret_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every part of `text` that :func:`find_secret` would call a credential,
    for redaction to mask: each shape of :data:`SHAPES` as written (whole, with the token
    characters that follow it, and by its prefix form where that reads as a token's random
    part) and written backwards; every run of base64/hex characters (`[A-Za-z0-9+/_-]`, 16 or
    more, `=` padding) in which :func:`find_secret` finds one (a decoded form holding a shape,
    or a high-entropy string); the same in the text with its percent-encoding, backslash
    escapes (`\\x68`, `\\u0068`, `\\150`) or HTML references (`&#104;`) decoded, masked where
    those characters were written; every separated-hex (`68:66:5f`) run whose decoding holds
    one. Overlapping spans are merged; sorted."""
    text = text[:MAX_SCAN_CHARS]
    spans = _plain_spans(text)
    for marker, pattern, decode in _MAPPED_DECODINGS:
        if marker not in text or pattern.search(text) is None:
            continue
        decoded, starts = _mapped(text, pattern, decode)
        for start, end in _plain_spans(decoded):
            # back where the characters were written (each escape decodes to one character)
            spans.append((starts[start], starts[end]))
    for match in itertools.islice(_SEPARATED_HEX.finditer(text), MAX_CANDIDATES):
        pairs = re.findall(r"(?:0x)?([0-9a-fA-F]{2})", match.group())
        decoded_hex = _printable(bytes.fromhex("".join(pairs)))
        if decoded_hex is not None and _find(decoded_hex, 1):
            spans.append(match.span())
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
