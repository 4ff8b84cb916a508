"""Which install extra provides a module a command could not import: a missing extra is one ``error:`` line naming
the ``pip install`` to run, not a traceback (``pip install scalerl`` has no extras: ``scalerl fit`` works, the
service's commands need ``[server]``, the REST commands ``[client]``, training ``[train]``)."""

from __future__ import annotations

#: Top-level module -> the extra that installs it (pyproject.toml's optional dependencies).
EXTRA_OF: dict[str, str] = {
    "httpx": "client",
    **dict.fromkeys(
        ("fastapi", "uvicorn", "sqlalchemy", "alembic", "psycopg", "pydantic_settings", "jinja2", "fastapi_offline"),
        "server",
    ),
    **dict.fromkeys(("celery", "redis", "kombu"), "worker"),
    **dict.fromkeys(("torch", "transformers", "safetensors", "math_verify"), "train"),
    "deepspeed": "deepspeed",
    **dict.fromkeys(("trl", "tensorboard", "mlflow", "optuna"), "integrations"),
    **dict.fromkeys(("fsspec", "sshfs", "asyncssh"), "storage"),
    "s3fs": "s3",
    "gcsfs": "gcs",
    "adlfs": "azure",
}


def missing_extra(exc: ImportError) -> str | None:
    """The advice for ``exc`` when it is a module an extra installs (None: any other import error)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    extra = EXTRA_OF.get(name)
    if extra is None:
        return None
    return f"this command needs the {extra!r} extra (no module named {name!r}): pip install 'scalerl[{extra}]'"
