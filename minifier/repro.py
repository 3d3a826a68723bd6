"""Standalone repro scripts: the graph, its inputs, the config and fault, and a judging ``__main__``.

A repro needs torch only (plus the package that injected a fault, when one is part of the bug).
It embeds :mod:`minifier.judge` verbatim, compiles with Inductor's caches off (a stale cached
build cannot "reproduce" a fixed bug) and exits 1 when the failure reproduces, 0 when not.
``python -m minifier repro.py`` (or :func:`minifier.saved.minify_repro`) shrinks it again.
"""

from __future__ import annotations

import base64
import datetime
import inspect
import io
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from . import judge as judge_module
from ._carried import carried_import_lines
from ._seams import module_source, symbolic_hint
from .context import CarriedContext

__all__ = ["write_repro", "REPRO_DIR", "INLINE_LIMIT"]

REPRO_DIR = Path("minifier_repros")
INLINE_LIMIT = 1 << 20  # inputs up to 1 MiB are embedded in the script; larger ones go beside it


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor(shape={tuple(value.shape)}, stride={value.stride()}, dtype={value.dtype})"
    return f"{type(value).__name__}({value!r})"


def _plain(value: Any) -> Any:
    """A Python scalar for a symbolic one (its hint), so it can be saved."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return symbolic_hint(value)
    return value


def _judge_source() -> str:
    lines = inspect.getsource(judge_module).splitlines()
    return "\n".join(line for line in lines if line.strip() != "from __future__ import annotations")


def _new_path(directory: Path) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S")
    for n in range(1000):
        path = directory / f"repro_{stamp}{'_' + str(n) if n else ''}.py"
        if not path.exists():
            return path
    raise FileExistsError(f"no free repro name in {directory}")


INPUTS_HEADER = "# Inputs:\n"  # the line that opens the inputs block (its DATA line closes it)


def inputs_block(inputs: Sequence[Any], state: dict[str, torch.Tensor], target: Path) -> str:
    """The repro's ``# Inputs:`` lines and its ``DATA = ...`` line; inputs and the graph's
    constants (``state``) are embedded up to :data:`INLINE_LIMIT`, else saved beside ``target``."""
    buffer = io.BytesIO()
    torch.save({"inputs": [v.detach().clone() if isinstance(v, torch.Tensor) else _plain(v) for v in inputs],
                "state": {k: v.detach().clone() for k, v in state.items()}}, buffer)
    blob = buffer.getvalue()
    if len(blob) <= INLINE_LIMIT:
        data_line = f"DATA = {base64.b64encode(blob).decode()!r}"
    else:
        sidecar = target.with_suffix(".inputs.pt")
        sidecar.write_bytes(blob)
        data_line = f"DATA = None  # saved beside this script: {sidecar.name}"
    described = "\n".join(f"#   {i}: {_describe(v)}" for i, v in enumerate(inputs))
    return f"{INPUTS_HEADER}{described}\n{data_line}"


def write_repro(module: torch.fx.GraphModule, inputs: Sequence[Any], *, spec: dict[str, Any], expected: dict[str, Any],
                pattern: Optional[str], context: CarriedContext, directory: "str | Path | None" = None,
                header: Optional[dict[str, Any]] = None, path: "str | Path | None" = None) -> Path:
    """Write the repro script and return its path."""
    directory = Path(directory) if directory is not None else REPRO_DIR
    target = Path(path) if path is not None else _new_path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    data_block = inputs_block(inputs, module.state_dict(), target)
    header = header or {}
    expected = {k: expected[k] for k in ("kind", "signature", "failing")}
    imports = carried_import_lines(context.imports)
    failure = expected["kind"] + (f": {expected['signature']}" if expected["kind"] != "accuracy" else "")
    text = f'''#!/usr/bin/env python3
"""Minified repro, written by the minifier on {datetime.date.today().isoformat()}.

Failure:  {failure}
Graph:    {header.get("final_nodes", "?")} nodes (from {header.get("start_nodes", "?")}), \
compiled at the {spec["level"]} level
Carried:  {context.description or "no injected fault"}; Inductor config {spec.get("config") or {}}

Run:      python {target.name}       exit 1: the failure reproduces; exit 0: it does not
Shrink:   python -m minifier {target.name}
"""
from __future__ import annotations

import base64
import io
import os
import sys
from pathlib import Path

ENV = {json.dumps(dict(context.env))}
os.environ.update(ENV)  # read when the packages below are imported
import torch
from math import inf, nan  # names the graph's printed code uses
from torch import device, tensor
{imports}

SPEC = {spec!r}
EXPECTED = {expected!r}
PATTERN = {pattern!r}

{data_block}


def load_data():
    raw = base64.b64decode(DATA) if DATA else Path(__file__).with_suffix(".inputs.pt").read_bytes()
    return torch.load(io.BytesIO(raw), weights_only=True)


# ---------------------------------------------------------------- the graph
{module_source(module)}


def make_module():
    module = Repro()
    module.load_state_dict(load_data()["state"], strict=False)
    return torch.fx.symbolic_trace(module)


def make_inputs():
    return load_data()["inputs"]


# ------------------------------------------- minifier/judge.py, verbatim
{_judge_source()}


def judge_in_child():
    """A crash or a hang would take this script down with it: judge in a child, read its fate."""
    import json
    import signal
    import subprocess

    env = dict(os.environ, MINIFIER_REPRO_CHILD="1")
    try:
        proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                              timeout=SPEC.get("timeout") or 600)
    except subprocess.TimeoutExpired:
        return outcome(TIMEOUT, "timeout", "no answer within the timeout")
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return outcome(CRASH, f"signal {{name}}", proc.stderr[-2000:])
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else outcome(CRASH, f"exit status {{proc.returncode}}", proc.stderr[-2000:])


def main():
    if os.environ.get("MINIFIER_REPRO_CHILD"):
        import json

        print(json.dumps(judge(make_module(), make_inputs(), SPEC)))
        return 0
    if EXPECTED["kind"] in (CRASH, TIMEOUT):
        outcome = judge_in_child()
    else:
        outcome = judge(make_module(), make_inputs(), SPEC)
    reproduces = matches(EXPECTED, outcome, PATTERN)
    print(f"{{outcome['kind']}}: {{describe(outcome)}}")
    print("REPRODUCES" if reproduces else "does not reproduce (expected " + EXPECTED["kind"] + ")")
    return 1 if reproduces else 0


if __name__ == "__main__":
    sys.exit(main())
'''
    target.write_text(text)
    return target
