"""How every scalerl command reports a failure: one ``error:`` line on stderr, an exit code, no traceback."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import click

from scalerl.cli.exit_codes import EXIT_BAD_INPUT

__all__ = ["EXIT_BAD_INPUT", "fail", "require_shipped_data", "write_output"]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code`` (bad input, 2, unless told otherwise)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def require_shipped_data() -> None:
    """At the start of a long-lived process (server, worker): the forecaster's shipped data files are readable, or
    one ``error:`` line that names the missing file (rl_core/scaling/fit/shipped.py), before anything is served."""
    from rl_core.scaling.fit.calibration import load_calibration
    from rl_core.scaling.fit.prior import load_prior
    from rl_core.scaling.fit.shipped import ShippedDataError

    for load in (load_prior, load_calibration):
        try:
            load()
        except ShippedDataError as exc:
            fail(str(exc))
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            fail(f"a shipped data file is malformed ({load.__name__}: {exc!r}): reinstall scalerl")


def write_output(path: Path, content: str | Callable[[Path], object], option: str) -> Path:
    """Write ``content`` (text, or a function that writes the file at the path it is given) to ``path`` (its
    folder created if missing) all at once: a temporary file beside it, renamed over it, so a failed write leaves
    no partial file and an existing one untouched. Failures are bad input (``option`` names what gave the path)."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            if isinstance(content, str):
                fh.write(content)
        if not isinstance(content, str):
            content(Path(tmp))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would have made it (mkstemp's file is private)
        os.replace(tmp, path)
        tmp = None
    except (FileExistsError, NotADirectoryError):
        fail(f"{option} {path}: cannot write: a folder on its path is a file")
    except OSError as exc:
        fail(f"{option} {path}: cannot write: {exc.strerror or exc}")
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path
