"""The read-only conversation viewer at ``/ui`` (docs/viewer.md): a page, a stylesheet and a script shipped in the
package, served under a Content-Security-Policy that keeps hostile conversations text."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Response

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # a new version of the service serves its new page at once
}
_FILES = {
    "/ui": ("index.html", "text/html; charset=utf-8"),
    "/ui/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
    "/ui/viewer.js": ("viewer.js", "text/javascript; charset=utf-8"),
}


def add_viewer(app: FastAPI) -> None:
    """Serve the viewer's three files, read once (not part of the API: left out of the OpenAPI description)."""
    static = files("chatlab.service").joinpath("static")
    for path, (name, media_type) in _FILES.items():
        _add_file(app, path, static.joinpath(name).read_bytes(), media_type)


def _add_file(app: FastAPI, path: str, content: bytes, media_type: str) -> None:
    async def serve_file() -> Response:
        """The file's bytes, read once at startup."""
        return Response(content, media_type=media_type, headers=_HEADERS)

    app.add_api_route(path, serve_file, methods=["GET"], include_in_schema=False, name=f"viewer:{path}")
