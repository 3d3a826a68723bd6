"""Generic FX-graph delta-debugging minifier (work in progress; see the project's issues).

This package never imports ``instrumented_backend``: the backend uses the minifier, not the
other way round.
"""

__all__: list[str] = []
