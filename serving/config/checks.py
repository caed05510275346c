"""Checks of single config values as text, before any model reads them: the error every check
raises, control and shell characters, pinned images and their registries, secret ids that are
not keys, the project id, and the closest key to a misspelled one.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from serving.config.stack_config import closest

FLOATING_TAGS = frozenset(
    {"latest", "nightly", "main", "master", "dev", "stable", "edge", "canary", "head"}
)
#: A major (`v0`, `1`) or major.minor (`v0.10`) tag: moved to each new release.
_FLOATING_VERSION = re.compile(r"[vV]?\d+(\.\d+)?")


class SettingsError(ValueError):
    """Stack configuration that cannot be deployed; the message names each bad key. A value the
    message echoes is redacted (:func:`endpoint.redact.redact`): every command that reports
    it (preview, plan, promote, the Pulumi program) shows no credential a stack holds."""

    def __init__(self, message: str) -> None:
        from endpoint.redact import redact

        super().__init__(redact(message, limit=None, by_name=False))


#: A value of this many hexadecimal digits or more is a generated key (`openssl rand -hex 16`
#: gives 32), never a Secret Manager secret id a person chose.
_KEY_HEX_DIGITS = 16
_HEX_RUN = re.compile(rf"[0-9a-fA-F]{{{_KEY_HEX_DIGITS},}}")


def check_secret_name(value: str, key: str) -> str:
    """A Secret Manager secret id, not the secret itself: a value that reads as a generated key
    (a run of 16 or more hexadecimal digits, as `openssl rand -hex` prints, a random string,
    or any credential shape) is refused, because the stack file, the program's outputs and
    every command that shows settings would carry it in clear text."""
    from endpoint.secret_shapes import find_secret, high_entropy

    if _HEX_RUN.search(value) or high_entropy(value) or find_secret(value):
        raise ValueError(
            f"config key {key!r} reads as a key, not as the id of the Secret Manager secret "
            "that holds it; store the key in Secret Manager (`gcloud secrets create NAME "
            "--data-file=-`), put NAME here, and rotate the key that was written in the stack "
            "file"
        )
    return value


#: Where images may come from unless a stack says otherwise (the official vLLM images).
DEFAULT_REGISTRIES: tuple[str, ...] = ("docker.io",)
#: An image reference: a letter or digit first, so no command ever reads one as an option.
IMAGE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


def image_registry(image: str) -> str:
    """The registry host of an image reference (`vllm/vllm-openai:v1` -> `docker.io`)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.lower()
    return "docker.io"


def image_repository(image: str) -> str:
    """`vllm/vllm-openai:v1` and `.../vllm-openai@sha256:...` -> `vllm-openai`."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def check_pinned_image(image: str) -> str:
    """`image`, or ValueError unless it names a fixed tag or a sha256 digest of 64 hex digits."""
    if not IMAGE_REFERENCE.fullmatch(image):
        raise ValueError(
            f"image {image!r} is not an image reference (a letter or digit first, then letters, "
            "digits, . _ / : @ - only, at most 255)"
        )
    if "@" in image:
        digest = image.split("@", 1)[1]
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise ValueError(
                f"image {image!r} has a malformed digest: only sha256: and 64 lowercase hex digits"
            )
        return image
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        raise ValueError(f"image {image!r} has no tag: pin a version tag or a @sha256: digest")
    if tag.lower() in FLOATING_TAGS or tag.lower().startswith(("nightly-", "latest-")):
        raise ValueError(
            f"image {image!r} uses the floating tag {tag!r}; pin a version tag or a @sha256: digest"
        )
    if _FLOATING_VERSION.fullmatch(tag):
        raise ValueError(
            f"image {image!r} uses {tag!r}, a major or major.minor tag that moves with each "
            "release (llm-d's guides use `v0`); pin a full version tag or a @sha256: digest"
        )
    return image


#: Keys whose values reach a shell script (the TPU startup script) or an argument vector
#: (vLLM's, the download job's) or a REST path: no shell metacharacters or whitespace.
SCRIPT_KEYS = frozenset(
    {
        "image",
        "pickerImage",
        "modelRevision",
        "drafterRevision",
        "servedModelName",
        "tpuRuntimeVersion",
        "network",
        "zone",
        "region",
        "bucketLocation",
        "healthCheckServiceAccount",
        "invokers",
        "sourceRanges",
        "apiKeySecret",
        "hfTokenSecret",
    }
)
#: Unicode categories no config value may hold: controls, invisible format characters
#: (zero-width space, bidirectional overrides, BOM), line/paragraph separators, surrogates and
#: private use. A value that looks like `main` must be `main`.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
#: A Google Cloud project id (6 to 30 lowercase letters, digits and hyphens, starting with a
#: letter, not ending with a hyphen), optionally domain-scoped (`example.com:my-project`).
PROJECT_ID = re.compile(r"(?:[a-z0-9][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")


def _invisible(text: str) -> str | None:
    return next((ch for ch in text if unicodedata.category(ch) in _INVISIBLE), None)


def check_project_id(value: Any) -> str:
    """`gcp:project` as Google allows it; it reaches REST paths and resource names."""
    if not isinstance(value, str) or not value:
        raise SettingsError("gcp:project is not set: `pulumi config set gcp:project <id>`")
    if not PROJECT_ID.fullmatch(value):
        raise SettingsError(
            f"gcp:project {value!r} is not a Google Cloud project id: 6 to 30 lowercase "
            "letters, digits and hyphens, starting with a letter and not ending with a hyphen "
            "(optionally domain-scoped, `example.com:my-project`)"
        )
    return value


_SHELL_META = re.compile(r"[\s;&|$`<>(){}\[\]*?!~#'\"\\]")


def check_text(key: str, value: Any) -> None:
    """Refuse control characters in any string value, and shell metacharacters in values
    that reach a script or argv (SCRIPT_KEYS). Lists and their items are checked too."""
    values = value if isinstance(value, list) else [value]
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            values = parsed
    for item in values:
        if not isinstance(item, str):
            continue
        control = _invisible(item)
        if control:
            raise SettingsError(
                f"config key {key!r}: {item!r} contains the control or invisible character "
                f"{control!r} (U+{ord(control):04X}); values are single-line visible text"
            )
        meta = _SHELL_META.search(item) if key in SCRIPT_KEYS else None
        if meta:
            raise SettingsError(
                f"config key {key!r}: {item!r} contains {meta.group()!r}; this value reaches a "
                "shell script or an argument list, which allow no whitespace or shell "
                "metacharacters (; & | $ ` < > ( ) { } [ ] * ? ! ~ # quotes \\)"
            )


def closest_key(key: str, known: Any) -> str:
    """` (did you mean 'maxNumSeqs'?)` for a misspelled key, or ''."""
    match = closest(key, list(known))
    return f" (did you mean {match!r}?)" if match else ""
