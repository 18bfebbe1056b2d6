"""The giod server: ``giod serve`` (FastAPI + uvicorn), installed with ``pip install 'giod[server]'``."""

from giod.errors import needs_extra

try:  # one clear error for every part of the server, rather than the first import that fails
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:
    raise needs_extra("server", "the giod server", exc) from exc

from giod.server.app import create_app, serve

__all__ = ["create_app", "serve"]
