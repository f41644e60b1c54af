"""/docs and /redoc served with local assets (fastapi-offline's copies), never from a CDN."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
PREFIX = "/docs-assets"
# the pages may load nothing from outside (ReDoc's footer logo would come from its CDN)
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; style-src 'self' "
    "'unsafe-inline'; img-src 'self' data: blob:; worker-src 'self' blob:; connect-src 'self'"
)


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CSP
    return page


def install(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc; the app must be built with both turned off."""
    app.mount(PREFIX, StaticFiles(directory=str(ASSETS)), name="docs-assets")
    spec = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return _local(
            get_swagger_ui_html(
                openapi_url=spec,
                title=f"{app.title} - API",
                swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js",
                swagger_css_url=f"{PREFIX}/swagger-ui.css",
                swagger_favicon_url=f"{PREFIX}/favicon.png",
            )
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return _local(
            get_redoc_html(
                openapi_url=spec,
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{PREFIX}/redoc.standalone.js",
                redoc_favicon_url=f"{PREFIX}/favicon.png",
                with_google_fonts=False,
            )
        )
