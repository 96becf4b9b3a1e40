"""Named pipelines per backend (the cpu_compiler.cc / gpu_compiler.cc equivalents); the pipeline issue fills this package."""
