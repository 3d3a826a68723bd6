"""``python -m instrumented_backend``: see :mod:`instrumented_backend.cli`."""

import sys

from .cli import main

sys.exit(main())
