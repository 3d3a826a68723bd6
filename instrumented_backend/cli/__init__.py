"""``python -m instrumented_backend`` and the ``instrumented-backend`` command: see :mod:`.commands`.

The top layer of the package: it reads the command line and calls the library's public API
(``instrumented_backend``); nothing of the package imports it.
"""

from __future__ import annotations

from .commands import main, parse_command_line

__all__ = ["main", "parse_command_line"]
