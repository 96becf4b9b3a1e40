"""Backends: from an optimized, buffer-assigned xhlo module to an executable (cpu now)."""
