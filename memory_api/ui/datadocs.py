"""Great Expectations Data Docs served by the console, offline.

Great Expectations writes its pages with stylesheets and scripts from public CDNs. The
console serves the pages from the reports directory and points each such reference at a
local copy of the same version (memory_api/ui/static/datadocs, see its README); one it has
no copy of is dropped (the Vega scripts the validation pages never call, a dark theme, the
logo on S3, which the site's own static folder has), so a page loads nothing from outside.
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.errors import NotFound
from memory_core.validate.summary import report_folder

LOCAL = "/ui/static/datadocs"
PREFIX = "/ui/data-docs"
# each CDN asset the pages reference (Great Expectations 1.x), by its URL, to the local copy
COPIES = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "bootstrap.min.css",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "bootstrap.min.js",
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "popper.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": (
        "bootstrap-table.min.css"
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": (
        "bootstrap-table.min.js"
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.css": "bootstrap-table-filter-control.min.css",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.css": "bootstrap-table-filter-control.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.js": "bootstrap-table-filter-control.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/"
    "bootstrap-datepicker.min.css": "bootstrap-datepicker.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/"
    "bootstrap-datepicker.min.js": "bootstrap-datepicker.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": (
        "fontawesome/css/all.min.css"
    ),
}
# the logo Great Expectations loads from S3 is in the site's own static folder too
LOGO = re.compile(r"https://great-expectations-web-assets\.s3[^\"']*/(logo-long\.png)[^\"']*")
# a tag that would load something from outside: a script, a stylesheet or an image
OUTSIDE = re.compile(
    r"<script\b[^>]*\bsrc=\"(https?:)?//[^\"]*\"[^>]*>\s*</script>"
    r"|<(?:link|img)\b[^>]*\b(?:href|src)=\"(https?:)?//[^\"]*\"[^>]*>",
    re.I,
)
# scripts run inline on these pages (the tables are filled by them): their own policy
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'"
)


def offline(page: str) -> str:
    """A Data Docs page whose assets all come from this server."""
    for url, local in COPIES.items():
        page = page.replace(f'"{url}"', f'"{LOCAL}/{local}"')
    page = LOGO.sub(PREFIX + r"/static/images/\1", page)
    return OUTSIDE.sub("", page)


def docs_root(console: Console, namespace: str) -> Path:
    """Where validation writes a namespace's Data Docs site."""
    return report_folder(console.service.settings.reports_dir, namespace)


def router(console: Console) -> APIRouter:
    """The key's namespace's Data Docs site under /ui/data-docs, for admin keys: a failed
    check shows the draft's values as they were, before redaction (a secret a draft quoted
    is what the "no secrets" rule fails on)."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)

    @r.get("/data-docs", response_class=HTMLResponse)
    def index(request: Request) -> Response:
        console.user(request).principal.require("admin")
        return RedirectResponse(f"{PREFIX}/index.html", status_code=303)

    @r.get("/data-docs/{path:path}")
    def page(request: Request, path: str) -> Response:
        p = console.user(request).principal
        p.require("admin")
        root = docs_root(console, p.namespace).resolve()
        target = (root / path).resolve()
        if not target.is_file() and "static/" in path:
            # a validation page's own favicon link climbs one folder too few: the site has
            # one static folder, at its root
            target = (root / path[path.index("static/") :]).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            what = "no validation has written Data Docs yet" if not root.is_dir() else path
            raise NotFound(f"no Data Docs page {path!r} ({what})")
        if target.suffix != ".html":
            return FileResponse(target)
        html = HTMLResponse(offline(target.read_text(encoding="utf-8")))
        html.headers["Content-Security-Policy"] = CSP
        return html

    return r
