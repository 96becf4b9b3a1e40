"""The CUDA compiler's pipeline: the cpu pipeline's stages (`pipelines/cpu.py`) with fusion
priced by an H200's roofline (`transforms/cost_model.H200`: launch overhead, HBM bandwidth,
fp32 peak), no batch-slice fusion (a GPU kernel runs every slice in one grid) but tree
reductions (a reduction that would leave multiprocessors idle split in two) and horizontal
loop fusion (independent small kernels as one launch), buffer offsets aligned for the GPU (256
bytes: what cuBLAS and vectorized loads want)."""

from .cpu import compiler_pipeline
from .pipeline import Pipeline

ALIGNMENT = 256  # bytes


def cuda_pipeline(alignment: int = ALIGNMENT) -> Pipeline:
    return compiler_pipeline("cuda", alignment, fusion_cost_model="cuda", batch_slices=False, gpu=True)
