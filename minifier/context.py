"""State a failure depends on that is not in the graph: Inductor config, injected faults.

Every candidate, every worker and every repro must see the same Inductor config patches and
the same injected faults as the original compile. Config is read here (non-default Inductor
settings); anything else comes from *context providers*: a package that can change how
Inductor compiles (``instrumented_backend``'s fault injection) registers a function returning
a :class:`CarriedContext` while its change is in effect. The minifier itself never imports
such a package; it only imports the modules a provider names, in workers and repros.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from ._seams import changed_inductor_config

__all__ = ["CarriedContext", "register_context_provider", "current_context"]


@dataclasses.dataclass(frozen=True)
class CarriedContext:
    """Modules to import and environment variables to set, in each worker and each repro."""

    imports: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    config: tuple[tuple[str, Any], ...] = ()
    description: str = ""

    def merged(self, other: "CarriedContext") -> "CarriedContext":
        return CarriedContext(
            imports=tuple(dict.fromkeys(self.imports + other.imports)),
            env=tuple(dict(self.env + other.env).items()),
            config=tuple(dict(self.config + other.config).items()),
            description="; ".join(d for d in (self.description, other.description) if d),
        )


_providers: list[Callable[[], Optional[CarriedContext]]] = []


def register_context_provider(provider: Callable[[], Optional[CarriedContext]]) -> None:
    """Call ``provider()`` at the start of every minification; a non-None result is carried."""
    if provider not in _providers:
        _providers.append(provider)


def current_context(config: Optional[dict[str, Any]] = None) -> CarriedContext:
    """The context in effect now: providers' contexts, changed Inductor config, then ``config``."""
    context = CarriedContext(config=tuple(changed_inductor_config().items()))
    for provider in _providers:
        extra = provider()
        if extra is not None:
            context = context.merged(extra)
    if config:
        context = context.merged(CarriedContext(config=tuple(config.items())))
    return context
