"""The Marketplace images the account lists as supported (``data/supported_images.json``, with its sources).

Pool creation does not consult the list, as on Azure, where a pool of an image the account cannot use is
created and its nodes then fail to allocate.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any


@functools.cache
def supported_images() -> tuple[dict[str, Any], ...]:
    text = resources.files("local_azure_batch").joinpath("data/supported_images.json").read_text(encoding="utf-8")
    return tuple(json.loads(text)["images"])
