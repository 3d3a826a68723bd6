"""``python -m instrumented_backend``: see :mod:`instrumented_backend.io.cli`."""

import sys

from .io.cli import main

sys.exit(main())
