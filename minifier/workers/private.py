"""Per-user folders in the temporary directory that only this user can write to.

Workers keep small things there across starts (the linker they link with, the CPU's vector-ISA
answers). Anything another user could write to is refused: a shared temporary directory lets
another user swap a file between our check and our use.

Nothing here imports torch.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Optional

__all__ = ["user_id", "private_directory", "user_folder"]


def user_id() -> int:
    """This process's user id (0 where the platform has none)."""
    return getattr(os, "getuid", lambda: 0)()


def private_directory(path: str) -> bool:
    """Make ``path`` a directory only this user can write to, or say it is not one."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    status = os.lstat(path)
    return stat.S_ISDIR(status.st_mode) and status.st_uid == user_id() and not status.st_mode & 0o022


def user_folder(name: str, root: Optional[str] = None) -> Optional[str]:
    """``root`` (default: ``minifier-<name>-<uid>`` in the temporary directory), made private;
    None when it cannot be (another user owns it, or others can write to it)."""
    path = root or os.path.join(tempfile.gettempdir(), f"minifier-{name}-{user_id()}")
    try:
        return path if private_directory(path) else None
    except OSError:
        return None
