"""What a repro script carries into worker processes, written and read without importing torch.

A repro names the modules it carries: those that apply its injected fault and those that define
its graph's custom ops (``import X  # carried: ...``), and the environment they read
(``ENV = {...}``). ``python -m minifier repro.py`` reads
both from the script's text, before it imports torch, and starts its worker with them at once:
the worker's imports then run while this process does its own.
"""

from __future__ import annotations

import ast
import re
from typing import Optional, Sequence

__all__ = ["CARRIED_IMPORT_NOTE", "carried_import_lines", "read_carried"]

CARRIED_IMPORT_NOTE = "# carried: applies an injected fault (see ENV) or defines the graph's custom ops"
_CARRIED_IMPORT = re.compile(r"^import ([\w.]+)  (?:" + re.escape(CARRIED_IMPORT_NOTE)
                           + r"|# applies the carried fault \(see ENV\))$", re.MULTILINE)  # and older repros' note


def carried_import_lines(imports: Sequence[str]) -> str:
    """The repro's lines that import the carried modules (a fault's, a custom op library's)."""
    return "\n".join(f"import {name}  {CARRIED_IMPORT_NOTE}" for name in imports)


def read_carried(text: str) -> Optional[tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]:
    """``(imports, env)`` a repro script carries, or None when ``text`` holds no ``ENV`` literal."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "ENV"):
            try:
                env = ast.literal_eval(node.value)
            except ValueError:
                return None
            if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
                return None
            return tuple(_CARRIED_IMPORT.findall(text)), tuple(env.items())
    return None
