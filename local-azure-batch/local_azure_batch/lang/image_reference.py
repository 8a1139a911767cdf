"""Container image references as a container engine reads them (``registry/repo/name:tag@digest``).

The grammar is that of distribution/reference (github.com/distribution/reference, ``reference.go`` and
``regexp.go``), which Docker and containerd use to parse the image a Batch task or pool names:

    reference      := name [ ":" tag ] [ "@" digest ]
    name           := [ domain "/" ] path-component [ "/" path-component ]*
    domain         := host [ ":" port ]        host: DNS components ([a-zA-Z0-9] and inner "-") joined by
                                              ".", or a bracketed IPv6 address
    path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag            := [\\w][\\w.-]{0,127}
    digest         := algorithm ":" [0-9a-fA-F]{32,}

Only a registry may have upper-case letters, so ``MyRegistry.azurecr.io/train:1`` is valid while
``Train:1`` and ``myregistry.azurecr.io/Train:1`` are not; a space is never part of a reference. The
problems are the library's own messages: "invalid reference format", "repository name must be lowercase"
(prefixed "invalid reference format: " as Docker reports it) and "repository name must not be more than
255 characters".
"""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
REFERENCE = re.compile(rf"^({_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?$")
NAME_TOTAL_LENGTH_MAX = 255


def reference_problem(reference: str) -> str | None:
    """Why a container engine could not parse ``reference`` (its own message), or None when it can."""
    match = REFERENCE.match(reference)
    if match is None:
        if REFERENCE.match(reference.lower()) is not None:
            return "invalid reference format: repository name must be lowercase"
        return "invalid reference format"
    name = match.group(1)
    if len(name) > NAME_TOTAL_LENGTH_MAX:
        return f"repository name must not be more than {NAME_TOTAL_LENGTH_MAX} characters"
    return None
