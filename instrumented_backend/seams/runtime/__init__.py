"""Running compiled code: profiler events, intermediate-value hooks, errors, AOTInductor packages."""
