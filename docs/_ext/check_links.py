"""Check every internal link and anchor of the built site, offline: ``python docs/_ext/check_links.py DIR``.

linkchecker (run next by ``make docs``) finds links to missing pages and files; its anchor plugin only warns and
takes minutes, so anchors are checked here: each ``href="page.html#id"`` (or ``#id``) must name an element id of
that page. Exits 1 listing each broken link.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.ids.add(value)
            elif name == "href" and tag == "a":
                self.links.append(value)


def broken_links(site: Path) -> list[str]:
    pages: dict[Path, _Page] = {}
    for path in sorted(site.rglob("*.html")):
        parser = _Page()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = parser
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("mailto:"):
                continue  # external: not checked offline
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such anchor)")
    return broken


def main() -> int:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_build/html")
    broken = broken_links(site)
    for line in broken:
        print(line, file=sys.stderr)
    links = sum(1 for _ in site.rglob("*.html"))
    print(f"{len(broken)} broken internal link(s) or anchor(s) in {links} pages of {site}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
