"""The giod server: ``giod serve`` (FastAPI + uvicorn)."""

from giod.server.app import create_app, serve

__all__ = ["create_app", "serve"]
