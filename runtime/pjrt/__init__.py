"""The PJRT C API plugin (libmlirxla_pjrt.so) and the Python side it calls."""
