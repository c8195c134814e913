"""The secrets this process holds, to take out of text that leaves it: standard library only.

A run's reason, a log line, a tool's error may quote a key ("auth failed with sk-..."). What is
taken out: the value of each environment variable whose name says it is a secret, the password of
each URL in one, and what the config files loaded hold (:func:`hold`, called by ``tether.config``).
Kept apart from ``tether.config`` so that a library run, which never reads a config file, does not
import it to say why it stopped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

# Keys whose value is a secret wherever they appear (`key_env` names a variable, not a secret).
SECRET_KEY = re.compile(r"(^|_)(api_key|key|token|secret|password|passwd|authorization)$", re.I)
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


def hold(secrets: Iterable[str]) -> None:
    """Add what a config file holds to what :func:`known_secrets` takes out."""
    _HELD.update(secrets)


def known_secrets() -> tuple[str, ...]:
    """The secrets this process holds, longest first, for taking out of text that leaves it (a
    run's reason, a log line): those of every config.toml it loaded (what ``tether.config.redacted``
    hides), the value of each environment variable whose name says it is one (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN``, ``TETHER_CONNECTIONS_KEY``) and the password of each URL in one
    (``TETHER_DATABASE_URL``). A value shorter than 8 characters or a path (``/etc/ssl/key.pem``)
    is no key, and hiding it would garble the text."""
    found = set(_HELD)
    for name, value in os.environ.items():
        value = value.strip()
        if secret_name(name):
            found.update({value, value.rpartition(" ")[2]})  # "Bearer X" too
        if "://" in value:
            found |= url_secrets(value)
    keys = (v for v in found if len(v) >= 8 and not v.startswith(("/", "~", "./", "../")))
    return tuple(sorted(keys, key=len, reverse=True))
