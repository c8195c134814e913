"""The secrets this process holds, to take out of text that leaves it, and the shapes credentials
come in (:data:`CREDENTIAL_SHAPES`): standard library only.

A run's reason, a log line, a tool's error may quote a key ("auth failed with sk-..."). What is
taken out: the value of each environment variable whose name says it is a secret, the password of
each URL in one, and what the config files loaded hold (:func:`hold`, called by ``tether.config``).
Kept apart from ``tether.config`` so that a library run, which never reads a config file, does not
import it to say why it stopped.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

# Keys whose value is a secret wherever they appear (`key_env` names a variable, not a secret).
# ``DB_PASS``, ``SMTP_PWD`` and ``*_CREDENTIALS`` too (``PWD`` the folder is a path: never hidden);
# ``GH_PAT`` and ``--pat`` (a personal access token), ``--bearer``.
SECRET_KEY = re.compile(
    r"(^|_)(api_key|key|token|secret|password|passwd|pass|pwd|passphrase|credentials?|authorization|pat|bearer)$",
    re.I,
)
# Words a secret's name is glued onto without an underscore: ``apikey``, ``accesstoken``.
_GLUED = re.compile(r"(^|_)(api|access|auth|client|private|secret|session|refresh|bearer)(key|token|secret)$", re.I)

_HELD: set[str] = set()  # the secrets of the config files loaded


def secret_name(name: str) -> bool:
    """``api_key``, ``--api-key``, ``GITHUB_TOKEN``, ``apiKey``, ``accesstoken``: a name whose value
    is a secret."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.lstrip("-")).replace("-", "_")  # camelCase too
    return bool(SECRET_KEY.search(name) or _GLUED.search(name)) and not name.lower().endswith("_env")


def url_secrets(url: str) -> set[str]:
    """The password of ``url`` and the values of its secret query parameters (``?api_key=X``)."""
    from urllib.parse import parse_qsl

    try:
        parts = urlsplit(url)
        return {parts.password or "", *(v for k, v in parse_qsl(parts.query) if secret_name(k))}
    except ValueError:
        return set()


def key_like(value: str) -> bool:
    """A value that is a key whatever its name (``GH_PAT = "ghp_..."``): a word of 16 characters
    or more, letters and digits mixed; the last word of "Bearer X" too."""
    word = value.strip().rpartition(" ")[2]
    return len(word) >= 16 and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


def table_secrets(table: Mapping[str, object]) -> set[str]:
    """The secrets of a server's ``env`` or ``headers`` table: the value of each entry whose name
    says it is one (``API_KEY``) or that looks like a key whatever its name (:func:`key_like`), as
    written and as the last word of "Bearer X"; and the password of a URL in one (``DATABASE_URL``).
    ``NODE_ENV = "production"`` is no key to hide."""
    found: set[str] = set()
    for name, value in table.items():
        if not isinstance(value, str):
            continue
        value = value.strip()
        if secret_name(name) or key_like(value):
            found.update({value, value.rpartition(" ")[2]})
        elif "://" in value:
            found |= url_secrets(value)
    return found


def worth_hiding(value: str) -> bool:
    """Whether ``value`` may be a key to take out of text: one shorter than 8 characters or a path
    (``/etc/ssl/key.pem``) is none, and hiding it would garble the text."""
    return len(value) >= 8 and not value.startswith(("/", "~", "./", "../"))


def hold(secrets: Iterable[str]) -> None:
    """Add what a config file holds to what :func:`known_secrets` takes out."""
    _HELD.update(secrets)


def known_secrets() -> tuple[str, ...]:
    """The secrets this process holds, longest first, for taking out of text that leaves it (a
    run's reason, a log line): those of every config.toml it loaded (what ``tether.config.redacted``
    hides), the value of each environment variable whose name says it is one (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN``, ``TETHER_CONNECTIONS_KEY``) and the password of each URL in one
    (``TETHER_DATABASE_URL``); those that may be keys (:func:`worth_hiding`)."""
    found = set(_HELD)
    for name, value in os.environ.items():
        value = value.strip()
        if secret_name(name):
            found.update({value, value.rpartition(" ")[2]})  # "Bearer X" too
        if "://" in value:
            found |= url_secrets(value)
    return tuple(sorted(filter(worth_hiding, found), key=len, reverse=True))


# Credentials in the shapes their issuers give them, (what it is, its pattern): memory refuses to
# save one (each would reach every future system prompt) and a knowledge base withholds one from
# what it stores and shows (each would reach every agent that searches it, and its provider).
CREDENTIAL_SHAPES: tuple[tuple[str, str], ...] = (
    ("an API key", r"sk-(?:proj-|ant-[a-z]+\d*-|svcacct-)?(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}"),
    ("an AWS access key", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("a GitHub token", r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("a GitLab token", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("a Slack token", r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("a Google API key", r"AIza[0-9A-Za-z_-]{35}"),
    ("a Stripe key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}"),
    ("a Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    ("an npm token", r"npm_[A-Za-z0-9]{36}"),
    ("a PyPI token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("a SendGrid key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    ("a JSON Web Token", r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ("a private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
)
# How each shape starts: searching a text for these with str.find takes milliseconds a megabyte,
# the whole pattern a second (see :func:`credential_matches`). Add a new shape's start here too.
CREDENTIAL_STARTS: dict[str, tuple[str, ...]] = {
    "an API key": ("sk-",),
    "an AWS access key": ("AKIA", "ASIA"),
    "a GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "a GitLab token": ("glpat-",),
    "a Slack token": ("xox",),
    "a Google API key": ("AIza",),
    "a Stripe key": ("sk_", "rk_"),
    "a Hugging Face token": ("hf_",),
    "an npm token": ("npm_",),
    "a PyPI token": ("pypi-",),
    "a SendGrid key": ("SG.",),
    "a JSON Web Token": ("eyJ",),
    "a private key": ("-----BEGIN ",),
}


@functools.cache
def credential_pattern() -> re.Pattern[str]:
    """:data:`CREDENTIAL_SHAPES` as one pattern (compiled on first use), each shape a group named
    ``s<its index>`` (:func:`credential_kind` reads a match's), not inside a longer word."""
    return re.compile("|".join(f"(?<![A-Za-z0-9_-])(?P<s{i}>{p})" for i, (_, p) in enumerate(CREDENTIAL_SHAPES)))


def credential_kind(match: re.Match[str]) -> str:
    """What :func:`credential_pattern`'s ``match`` found: ``"an API key"``, ``"a private key"``..."""
    return CREDENTIAL_SHAPES[int(str(match.lastgroup)[1:])][0]


def credential_matches(text: str) -> list[re.Match[str]]:
    """Each credential in ``text``, by where it starts (where two shapes match at one place, the
    first's, as :func:`credential_pattern` finds it). Only where a shape's start is: found by
    ``str.find``, each tried with that shape's pattern alone, and only the matches kept (the starts
    of a 64 MB file of ``sk-sk-sk-...`` held gigabytes)."""
    if any(label not in CREDENTIAL_STARTS for label, _ in CREDENTIAL_SHAPES):
        return list(credential_pattern().finditer(text))  # a shape of unknown start: the slow way
    found: dict[int, re.Match[str]] = {}
    for shape, (label, _) in zip(_shape_patterns(), CREDENTIAL_SHAPES, strict=True):
        for prefix in CREDENTIAL_STARTS[label]:
            at = text.find(prefix)
            while at >= 0:
                if at not in found and (at == 0 or text[at - 1] not in _IN_A_WORD):
                    match = shape.match(text, at)
                    if match is not None:
                        found[at] = match
                at = text.find(prefix, at + 1)
    return [found[at] for at in sorted(found)]


_PRIVATE_KEY_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")


def withhold_credentials(text: str) -> tuple[str, int]:
    """``text`` with each credential in the shapes memory refuses (:data:`CREDENTIAL_SHAPES`: API keys,
    cloud and repository tokens, JSON Web Tokens, private keys to their END line) replaced by
    ``[credential withheld: what it was]``, line breaks kept so citations still point at the
    right lines; and how many were replaced. For text that leaves tether to others (a knowledge
    base's chunks, a person's words on a decision), where no one needs the key itself."""
    found = credential_matches(text)  # where their starts are: the pattern over a megabyte took a second
    out: list[str] = []
    at = count = 0
    for match in found:
        if match.start() < at:
            continue  # inside the credential (or private key block) just withheld
        what = credential_kind(match)
        end = match.end()
        if what == "a private key":
            closing = _PRIVATE_KEY_END.search(text, end)
            end = closing.end() if closing is not None else len(text)
        out += [text[at : match.start()], f"[credential withheld: {what}]", "\n" * text.count("\n", match.start(), end)]
        at, count = end, count + 1
    if not count:
        return text, 0
    out.append(text[at:])
    return "".join(out), count


# What no credential starts right after (the shapes' lookbehind), checked before a match is tried.
_IN_A_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@functools.cache
def _shape_patterns() -> tuple[re.Pattern[str], ...]:
    """Each shape's pattern as :func:`credential_pattern` holds it, its group named alike."""
    return tuple(re.compile(f"(?<![A-Za-z0-9_-])(?P<s{i}>{p})") for i, (_, p) in enumerate(CREDENTIAL_SHAPES))
