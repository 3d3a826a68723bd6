"""Diagnosis: explain compile errors, check accuracy, find the failing layer and the first diverging kernel."""

from __future__ import annotations

from .compile_error import CompileErrorReport, KernelCompileError, explain_compile_error

__all__ = ["CompileErrorReport", "KernelCompileError", "explain_compile_error"]
