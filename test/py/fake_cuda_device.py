"""A stand-in for a GPU with the methods `mlirxla.runtime.cuda.executor` calls: it allocates
addresses from a fake base, keeps copied bytes, and records every call, so that a test can
check the plan a runtime executes (which kernels, which grid and block, which pointers into
the slab, which GEMM dimensions) on a machine without a GPU. Kernels and GEMMs compute
nothing: the bytes copied back are what was copied in, or zeros."""

BASE = 0x7F0000000000


class FakeCudaDevice:
    def __init__(self):
        self.calls = []
        self.memory = {}
        self.next_address = BASE

    def load_module(self, image: bytes, kind: str):
        self.calls.append(["load_module", kind, len(image)])
        return "module"

    def function(self, module, name: str):
        self.calls.append(["function", name])
        return name

    def allocate(self, nbytes: int) -> int:
        address = self.next_address
        self.next_address += (nbytes + 255) // 256 * 256
        self.calls.append(["allocate", nbytes, address])
        return address

    def copy_to_device(self, address: int, data: bytes) -> None:
        self.memory[address] = bytes(data)
        self.calls.append(["copy_to_device", address, len(data)])

    def copy_to_host(self, address: int, nbytes: int) -> bytes:
        self.calls.append(["copy_to_host", address, nbytes])
        return self.memory.get(address, b"\0" * nbytes)[:nbytes].ljust(nbytes, b"\0")

    def copy_on_device(self, destination: int, source: int, nbytes: int) -> None:
        self.calls.append(["copy_on_device", destination, source, nbytes])

    def launch(self, function, grid, block, shared_bytes: int, pointers: list) -> None:
        self.calls.append(["launch", function, list(grid), list(block), shared_bytes, list(pointers)])

    def gemm(self, dtype, m, n, k, batch, transpose_lhs, transpose_rhs, lhs, rhs, out) -> None:
        self.calls.append(["gemm", dtype, m, n, k, batch, transpose_lhs, transpose_rhs, lhs, rhs, out])

    def synchronize(self) -> None:
        self.calls.append(["synchronize"])
