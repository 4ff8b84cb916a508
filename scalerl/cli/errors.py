"""How every scalerl command reports a failure: one ``error:`` line on stderr, an exit code, no traceback; and how
a command that talks to the service connects (:func:`connect`: the token check) and reports a refused request
(:func:`refused`: the 4xx messages). Exit codes: scalerl/cli/exit_codes.py."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from scalerl.cli.exit_codes import EXIT_AUTH, EXIT_BAD_INPUT

if TYPE_CHECKING:
    # The REST client needs httpx (extras `client`/`server`): imported when a command connects, so that `scalerl
    # fit` works from `pip install scalerl` with no extras.
    from scalerl.client.api import ApiError, Client

__all__ = ["EXIT_BAD_INPUT", "connect", "fail", "refused", "require_shipped_data", "write_output"]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code`` (bad input, 2, unless told otherwise)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def connect(url: str | None, token: str | None) -> Client:
    """A client for the service (the arguments, else the environment, else the saved credentials); no token
    exits 6."""
    from scalerl.client.api import Client

    client = Client(url, token, timeout=60.0)
    if client.token is None:
        fail("no API token: pass --token, set SCALERL_TOKEN, or start the server once to create one", EXIT_AUTH)
    return client


def refused(exc: ApiError, client: Client, context: str = "") -> NoReturn:
    """A 4xx: 401/403 exit 6 (auth), anything else 2 (bad input), the message prefixed by ``context``."""
    from scalerl.client.api import detail_text

    if exc.status_code in (401, 403):
        fail(f"the server at {client.url} refused the token ({exc.status_code}: {detail_text(exc.detail)})", EXIT_AUTH)
    fail(f"{context}server answered {exc.status_code}: {detail_text(exc.detail)}")


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
