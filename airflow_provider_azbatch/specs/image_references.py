"""Container image references checked against the grammar registries and Docker read them by.

The grammar is distribution/reference's (the reference Docker, containerd and Batch's node agent parse)::

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [ domain "/" ] path-component [ "/" path-component ]*     (at most 255 characters)
    domain     := host-component [ "." host-component ]* [ ":" port ]       (letters of any case)
    path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex{32,}

A first component is a registry only when it holds a "." or a ":" or is ``localhost``; otherwise the whole name
is a Docker Hub repository. Batch refuses nothing of this when the task is added: a malformed reference fails
the task on the node, when the image is pulled. Checked here, it fails the DAG file instead, saying which rule
the reference breaks and how it reads once fixed.
"""

from __future__ import annotations

import re

MAX_NAME = 255
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_HOST_COMPONENT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_PORT = re.compile(r"[0-9]+")
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
RULE = "[registry/]repository[:tag][@digest], e.g. myregistry.azurecr.io/train-image:1"


def _fixed_component(component: str) -> str:
    """A path component as it would be valid: lowercase, runs of other characters as one '-'."""
    fixed = re.sub(r"[^a-z0-9._-]+", "-", component.lower())
    return re.sub(r"^[._-]+|[._-]+$", "", fixed) or "name"


def _split(reference: str) -> tuple[str, str | None, str | None]:
    name, _, digest = reference.partition("@")
    tag = None
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest if "@" in reference else None


def _is_domain(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def reference_problem(reference: str) -> str | None:
    """Why ``reference`` is not a valid image reference (the rule and the fix), or None when it is."""
    if not reference:
        return "is empty"
    if any(character.isspace() for character in reference):
        fixed = re.sub(r"\s+", "-", reference.strip())
        return f"has whitespace, which no image reference holds ({RULE}); did you mean {fixed.lower()!r}?"
    name, tag, digest = _split(reference)
    components = name.split("/")
    domain = components[0] if len(components) > 1 and _is_domain(components[0]) else None
    path = components[1:] if domain is not None else components
    if domain is not None:
        host, _, port = domain.partition(":")
        if not all(_HOST_COMPONENT.fullmatch(part) for part in host.split(".")) or (port and not _PORT.fullmatch(port)):
            return (
                f"has an invalid registry {domain!r}: a host name of letters, digits, '-' and '.' with an optional "
                f":port ({RULE})"
            )
    bad = [component for component in path if not _PATH_COMPONENT.fullmatch(component)]
    if bad:
        fixed_path = "/".join(_fixed_component(component) for component in path)
        fixed = f"{domain}/{fixed_path}" if domain is not None else fixed_path
        fixed += (f":{tag}" if tag is not None else "") + (f"@{digest}" if digest is not None else "")
        what = "lowercase letters, digits and single '.', '_' or '-' between them"
        if any(component != component.lower() for component in bad):
            what = "lowercase (only the registry's host may hold capitals): " + what
        return (
            f"has an invalid repository name {bad[0]!r}: repository names are {what} ({RULE}); did you mean {fixed!r}?"
        )
    if len(name) > MAX_NAME:
        return f"has a name of {len(name)} characters; at most {MAX_NAME} are allowed"
    if tag is not None and not _TAG.fullmatch(tag):
        return (
            f"has an invalid tag {tag!r}: a tag is 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' "
            f"or '-' ({RULE})"
        )
    if digest is not None and not _DIGEST.fullmatch(digest):
        return f"has an invalid digest {digest!r}: write algorithm:hex, e.g. sha256: and 64 hexadecimal digits"
    return None


def likely_tag_typo(reference: str) -> str | None:
    """``latest`` when the tag looks like a misspelling of it (a valid tag that most likely does not exist)."""
    import difflib

    _, tag, _ = _split(reference)
    if tag is None or tag.startswith("latest") or abs(len(tag) - len("latest")) > 1:
        return None
    return "latest" if difflib.SequenceMatcher(None, tag.lower(), "latest").ratio() >= 0.8 else None
