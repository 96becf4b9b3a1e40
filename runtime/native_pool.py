"""The native thread pool that runs a sliced kernel's slices and a large GEMM's parts, with no
Python and no GIL between the threads, as XLA:CPU runs its parallel loops and GEMMs on its own
(Eigen) thread pool rather than OpenBLAS's.

`cpu_threads() - 1` helper threads (started on first use) serve one job at a time: a job is
`fn(ctx, index, part)` for `index` below `count`. The caller is part 0 and helper `p` part
`p` (a part numbers the thread, so that each can have memory of its own: a sliced kernel's
scratch); every thread claims the next index not yet claimed when it finishes one, so a
thread slowed by anything else on its core runs fewer of them. Only `parts` threads take
part. One caller at a time has the helpers; a second caller meanwhile runs its own job alone,
with the same indices, so a job's results never depend on who ran it.

Why native and spinning: on the 2-core VM these figures come from, a Python split helper
woken from sleep had not started when its caller had run a 170 us kernel's every slice,
and while an OpenBLAS worker spun on the other CPU, Linux woke the helper on its caller's
own CPU, where the two ran one after the other. A helper here spins (`pause`) for `SPIN_S`
after each job before it sleeps on a futex, so the jobs of one execution find it awake. It
yields its CPU while spinning only where that CPU is its caller's (the caller records its
CPU with each job), and a caller waiting for a helper's last indices yields only where a
helper runs on its own CPU (each helper sets its CPU's bit for the job): a yield hands the
CPU to any other process on it for a time slice, and beside a busy process on the other of
2 cores a helper that yielded every 64 spins ran a tenth of the time, so a split log1p of
2^20 elements took 1.15-1.25 ms, as on one thread; 0.82-1.0 ms now (alone, 0.58-0.66 either
way).
OpenBLAS's workers spin too, for 0.1 s after each GEMM, on the cores the kernels after it
need: so GEMMs run on OpenBLAS's single-threaded path, their rows (or columns) in parts over
this pool (`pooled_gemm`), and only this pool's threads ever spin. transformer_bf16's masked
exponential (3 MiB, after the attention GEMMs) went from 58-66% of the triad to 98-108%
(`docs/decisions.md`).

Who calls it: `SlicedKernelThunk.run` with `mlirxla_slices_<arity>` (compiled per arity on
first use) over a table of the kernel's pointers; a single device's native drivers with
functions of their own module (`driver_emitter.emit_sliced_kernel`); GEMMs in parts through
`mlirxla_gemm_<element>`, which has `cblas_?gemm`'s signature, and batches of them through
`mlirxla_gemm_batch_<element>`.

A job is a function pointer and a context the caller keeps alive until `run` returns: the
pool's state is one block of 64-bit words (`Slot`), written in the caller's job order and
read by the helpers with the acquire and release orderings the IR spells out. The claim word
holds the job's epoch (its generation) above its next index, so a helper that woke late
cannot claim from a later job.
"""

import ctypes
import enum
import platform
import sys
import threading

from mlirxla.errors import MlirxlaError

from . import blas
from .llvm_host import compiled
from .threads import cpu_threads

# a helper spins this long after a job: the masked exponential took 123-205 us (best to median)
# with 0.2 ms, 94-149 with 2 ms (a prototype, OpenBLAS single-threaded)
SPIN_S = 2e-3
# a GEMM of fewer multiply-adds runs whole on the caller: OpenBLAS's own threshold for threading
GEMM_SPLIT_WORK = 1 << 18
FUTEX = {"x86_64": 202, "aarch64": 98}  # Linux's futex system call, per machine
# a spinning thread's hint to the core (x86's `pause`, Arm's `yield`), and its declaration
RELAX = {"x86_64": ("llvm.x86.sse2.pause", ""), "aarch64": ("llvm.aarch64.hint", "i32 1")}
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
# a caller waiting this long for the helpers' last indices yields its CPU at every look when a
# helper runs on it: a helper Linux placed on the caller's own CPU gets to finish them
CALLER_YIELDS_AFTER_NS = 20_000
ROW_MAJOR, NO_TRANSPOSE = 101, 111


class Slot(enum.IntEnum):
    """The pool's words, the ones its threads write often on cache lines of their own."""

    CLAIM = 0  # epoch << 32 | next index
    DONE = 8  # indices finished
    GENERATION = 16  # the epoch of the latest job (its low 32 bits, a futex word)
    SLEEPERS = 17  # helpers sleeping on GENERATION
    FUNCTION = 24
    CONTEXT = 25
    COUNT = 26
    PARTS = 27
    BUSY = 28  # a caller has the helpers
    SPIN_NS = 29
    CALLER_CPU = 30  # the CPU the latest job's caller published it from
    HELPER_CPUS = 31  # the CPUs (modulo 64, one bit each) the helpers run the latest job on
    WORDS = 32


def pool_ir() -> str:
    machine = platform.machine()
    if sys.platform != "linux" or machine not in FUTEX:
        raise MlirxlaError(f"the native thread pool needs Linux on {' or '.join(FUTEX)} (its futex system call); "
                           f"this host is {sys.platform} on {machine}")
    hint, argument = RELAX[machine]
    relax = f"call void @{hint}({argument})"
    declared = f"declare void @{hint}({argument.split()[0] if argument else ''})"

    def slots(*which: Slot) -> str:
        """`%<slot>_at`, the address of each slot in `%pool`."""
        return "\n".join(f"  %{slot.name.lower()}_at = getelementptr i64, ptr %pool, i64 {int(slot)}" for slot in which)

    return f"""
declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)
declare i32 @sched_yield()
declare i32 @sched_getcpu()
{declared}

define internal i64 @now_ns() {{
entry:
  %time = alloca [2 x i64], align 8
  call i32 @clock_gettime(i32 1, ptr %time)
  %seconds = load i64, ptr %time
  %nanos_at = getelementptr i64, ptr %time, i64 1
  %nanos = load i64, ptr %nanos_at
  %scaled = mul i64 %seconds, 1000000000
  %now = add i64 %scaled, %nanos
  ret i64 %now
}}

; a CPU's bit in a word of 64 (CPUs 64 apart share one); every bit when the CPU is unknown (-1)
define internal i64 @cpu_bit(i32 %cpu) {{
entry:
  %unknown = icmp slt i32 %cpu, 0
  %wide = zext i32 %cpu to i64
  %position = and i64 %wide, 63
  %bit = shl i64 1, %position
  %result = select i1 %unknown, i64 -1, i64 %bit
  ret i64 %result
}}

; claims and runs indices of the job of `epoch` until none is left
define internal void @work(ptr %pool, i64 %epoch, i64 %part) {{
entry:
{slots(Slot.CLAIM, Slot.DONE, Slot.COUNT, Slot.FUNCTION, Slot.CONTEXT)}
  br label %claim
claim:
  %word = load atomic i64, ptr %claim_at acquire, align 8
  %word_epoch = lshr i64 %word, 32
  %current = icmp eq i64 %word_epoch, %epoch
  br i1 %current, label %check, label %out
check:
  %index = and i64 %word, 4294967295
  %count = load atomic i64, ptr %count_at monotonic, align 8
  %left = icmp ult i64 %index, %count
  br i1 %left, label %take, label %out
take:
  %taken = add i64 %word, 1
  %exchange = cmpxchg ptr %claim_at, i64 %word, i64 %taken acq_rel acquire
  %won = extractvalue {{ i64, i1 }} %exchange, 1
  br i1 %won, label %run, label %claim
run:
  %function = load atomic ptr, ptr %function_at monotonic, align 8
  %context = load atomic ptr, ptr %context_at monotonic, align 8
  call void %function(ptr %context, i64 %index, i64 %part)
  atomicrmw add ptr %done_at, i64 1 release
  br label %claim
out:
  ret void
}}

define void @mlirxla_pool_serve(ptr %pool, i64 %part) {{
entry:
{slots(Slot.GENERATION, Slot.SLEEPERS, Slot.PARTS, Slot.SPIN_NS, Slot.CALLER_CPU, Slot.HELPER_CPUS)}
  %seen_at = alloca i32, align 4
  %spins_at = alloca i64, align 8
  %since_at = alloca i64, align 8
  %first = load atomic i32, ptr %generation_at acquire, align 8
  store i32 %first, ptr %seen_at
  br label %idle
idle:
  %start = call i64 @now_ns()
  store i64 %start, ptr %since_at
  store i64 0, ptr %spins_at
  br label %spin
spin:
  %generation = load atomic i32, ptr %generation_at acquire, align 8
  %seen = load i32, ptr %seen_at
  %new = icmp ne i32 %generation, %seen
  br i1 %new, label %job, label %relax
relax:
  {relax}
  %spins = load i64, ptr %spins_at
  %spins_next = add i64 %spins, 1
  store i64 %spins_next, ptr %spins_at
  %spins_low = and i64 %spins_next, 63
  %look = icmp eq i64 %spins_low, 0
  br i1 %look, label %clock, label %spin
clock:
  %helper_cpu = call i32 @sched_getcpu()
  %caller_cpu = load atomic i64, ptr %caller_cpu_at monotonic, align 8
  %helper_cpu_wide = sext i32 %helper_cpu to i64
  %beside_caller = icmp eq i64 %helper_cpu_wide, %caller_cpu
  br i1 %beside_caller, label %give_way, label %timed
give_way:
  call i32 @sched_yield()
  br label %timed
timed:
  %now = call i64 @now_ns()
  %since = load i64, ptr %since_at
  %spun = sub i64 %now, %since
  %spin_ns = load atomic i64, ptr %spin_ns_at monotonic, align 8
  %enough = icmp sgt i64 %spun, %spin_ns
  br i1 %enough, label %sleep, label %spin
sleep:
  atomicrmw add ptr %sleepers_at, i64 1 seq_cst
  %seen_sleeping = load i32, ptr %seen_at
  call i64 (i64, ...) @syscall(i64 {FUTEX[machine]}, ptr %generation_at, i32 {FUTEX_WAIT_PRIVATE}, i32 %seen_sleeping, ptr null, ptr null, i32 0)
  atomicrmw sub ptr %sleepers_at, i64 1 seq_cst
  br label %idle
job:
  store i32 %generation, ptr %seen_at
  %parts = load atomic i64, ptr %parts_at monotonic, align 8
  %takes_part = icmp slt i64 %part, %parts
  br i1 %takes_part, label %working, label %idle
working:
  %epoch = zext i32 %generation to i64
  %working_cpu = call i32 @sched_getcpu()
  %working_bit = call i64 @cpu_bit(i32 %working_cpu)
  atomicrmw or ptr %helper_cpus_at, i64 %working_bit monotonic
  call void @work(ptr %pool, i64 %epoch, i64 %part)
  br label %idle
}}

; 1 when the helpers took part, 0 when the caller ran the job alone
define i32 @mlirxla_pool_run(ptr %pool, ptr %function, ptr %context, i64 %count, i64 %parts) {{
entry:
{slots(Slot.CLAIM, Slot.DONE, Slot.GENERATION, Slot.SLEEPERS, Slot.FUNCTION, Slot.CONTEXT, Slot.COUNT, Slot.PARTS, Slot.BUSY, Slot.CALLER_CPU, Slot.HELPER_CPUS)}
  %several = icmp sgt i64 %parts, 1
  br i1 %several, label %lock, label %alone
lock:
  %locking = cmpxchg ptr %busy_at, i64 0, i64 1 acquire monotonic
  %locked = extractvalue {{ i64, i1 }} %locking, 1
  br i1 %locked, label %publish, label %alone
publish:
  %previous = load atomic i32, ptr %generation_at monotonic, align 8
  %generation = add i32 %previous, 1
  %epoch = zext i32 %generation to i64
  store atomic ptr %function, ptr %function_at monotonic, align 8
  store atomic ptr %context, ptr %context_at monotonic, align 8
  store atomic i64 %count, ptr %count_at monotonic, align 8
  store atomic i64 %parts, ptr %parts_at monotonic, align 8
  store atomic i64 0, ptr %done_at monotonic, align 8
  %cpu = call i32 @sched_getcpu()
  %cpu_wide = sext i32 %cpu to i64
  store atomic i64 %cpu_wide, ptr %caller_cpu_at monotonic, align 8
  store atomic i64 0, ptr %helper_cpus_at monotonic, align 8
  %first_claim = shl i64 %epoch, 32
  store atomic i64 %first_claim, ptr %claim_at release, align 8
  store atomic i32 %generation, ptr %generation_at seq_cst, align 8
  %sleepers = load atomic i64, ptr %sleepers_at seq_cst, align 8
  %asleep = icmp sgt i64 %sleepers, 0
  br i1 %asleep, label %wake, label %share
wake:
  call i64 (i64, ...) @syscall(i64 {FUTEX[machine]}, ptr %generation_at, i32 {FUTEX_WAKE_PRIVATE}, i32 2147483647, ptr null, ptr null, i32 0)
  br label %share
share:
  call void @work(ptr %pool, i64 %epoch, i64 0)
  %since = call i64 @now_ns()
  br label %wait
wait:
  %done = load atomic i64, ptr %done_at acquire, align 8
  %finished = icmp sge i64 %done, %count
  br i1 %finished, label %release, label %pause
pause:
  {relax}
  %now = call i64 @now_ns()
  %waited = sub i64 %now, %since
  %long = icmp sgt i64 %waited, {CALLER_YIELDS_AFTER_NS}
  br i1 %long, label %shared, label %wait
shared:
  %helpers_cpus = load atomic i64, ptr %helper_cpus_at monotonic, align 8
  %own_bit = call i64 @cpu_bit(i32 %cpu)
  %with_own = and i64 %helpers_cpus, %own_bit
  %beside_helper = icmp ne i64 %with_own, 0
  br i1 %beside_helper, label %yield, label %wait
yield:
  call i32 @sched_yield()
  br label %wait
release:
  store atomic i64 0, ptr %busy_at release, align 8
  ret i32 1
alone:
  %none = icmp sle i64 %count, 0
  br i1 %none, label %out, label %alone_loop
alone_loop:
  %index = phi i64 [ 0, %alone ], [ %next, %alone_loop ]
  call void %function(ptr %context, i64 %index, i64 0)
  %next = add i64 %index, 1
  %more = icmp slt i64 %next, %count
  br i1 %more, label %alone_loop, label %out
out:
  ret i32 0
}}
"""


GEMM_ELEMENTS = {"f32": "float", "f64": "double"}
GEMM_FIELDS = (("ta", "i32"), ("tb", "i32"), ("m", "i64"), ("n", "i64"), ("k", "i64"), ("alpha", None), ("a", "ptr"),
               ("lda", "i64"), ("b", "ptr"), ("ldb", "i64"), ("beta", None), ("c", "ptr"), ("ldc", "i64"),
               ("parts", "i64"), ("by_rows", "i1"))


def gemm_ir(element: str, routine: int, pool: int, parts: int) -> str:
    """`mlirxla_gemm_<element>`, with `cblas_?gemm`'s signature: the BLAS `routine` (at that
    address) on the calling thread for a small or column-major GEMM, else in up to `parts`
    parts of the larger of its rows and columns over the pool at `pool` (each part packs the
    other operand whole, so the larger side is the one split)."""
    scalar = GEMM_ELEMENTS[element]
    kinds = [kind or scalar for _, kind in GEMM_FIELDS]
    record = f"%gemm_{element}"

    def field(name: str, index: int, verb: str) -> str:
        at = f"  %{name}_at = getelementptr {record}, ptr %context, i32 0, i32 {index}\n"
        if verb == "load":
            return at + f"  %{name} = load {kinds[index]}, ptr %{name}_at"
        return at + f"  store {kinds[index]} %{name}, ptr %{name}_at"

    loads = "\n".join(field(name, index, "load") for index, (name, _) in enumerate(GEMM_FIELDS))
    stores = "\n".join(field(name, index, "store") for index, (name, _) in enumerate(GEMM_FIELDS))

    def call(order: str, m: str, n: str, a: str, b: str, c: str) -> str:
        return (f"  call void %routine(i32 {order}, i32 %ta, i32 %tb, i64 {m}, i64 {n}, i64 %k, {scalar} %alpha, ptr {a}, "
                f"i64 %lda, ptr {b}, i64 %ldb, {scalar} %beta, ptr {c}, i64 %ldc)")

    return f"""
{record} = type {{ {", ".join(kinds)} }}

define internal void @gemm_part_{element}(ptr %context, i64 %index, i64 %part) {{
entry:
  %routine = inttoptr i64 {routine} to ptr
{loads}
  %total = select i1 %by_rows, i64 %m, i64 %n
  %from_scaled = mul i64 %total, %index
  %first = udiv i64 %from_scaled, %parts
  %after = add i64 %index, 1
  %to_scaled = mul i64 %total, %after
  %last = udiv i64 %to_scaled, %parts
  %size = sub i64 %last, %first
  br i1 %by_rows, label %rows, label %columns
rows:
  %a_plain = icmp eq i32 %ta, {NO_TRANSPOSE}
  %a_step = select i1 %a_plain, i64 %lda, i64 1
  %a_offset = mul i64 %first, %a_step
  %a_rows = getelementptr {scalar}, ptr %a, i64 %a_offset
  %c_offset = mul i64 %first, %ldc
  %c_rows = getelementptr {scalar}, ptr %c, i64 %c_offset
{call(str(ROW_MAJOR), "%size", "%n", "%a_rows", "%b", "%c_rows")}
  ret void
columns:
  %b_plain = icmp eq i32 %tb, {NO_TRANSPOSE}
  %b_step = select i1 %b_plain, i64 1, i64 %ldb
  %b_offset = mul i64 %first, %b_step
  %b_columns = getelementptr {scalar}, ptr %b, i64 %b_offset
  %c_columns = getelementptr {scalar}, ptr %c, i64 %first
{call(str(ROW_MAJOR), "%m", "%size", "%a", "%b_columns", "%c_columns")}
  ret void
}}

define void @mlirxla_gemm_{element}(i32 %order, i32 %ta, i32 %tb, i64 %m, i64 %n, i64 %k, {scalar} %alpha, ptr %a, i64 %lda, ptr %b, i64 %ldb, {scalar} %beta, ptr %c, i64 %ldc) {{
entry:
  %routine = inttoptr i64 {routine} to ptr
  %mn = mul i64 %m, %n
  %work = mul i64 %mn, %k
  %small = icmp slt i64 %work, {GEMM_SPLIT_WORK}
  %column_major = icmp ne i32 %order, {ROW_MAJOR}
  %whole = or i1 %small, %column_major
  br i1 %whole, label %direct, label %split
direct:
{call("%order", "%m", "%n", "%a", "%b", "%c")}
  ret void
split:
  %by_rows = icmp sge i64 %m, %n
  %total = select i1 %by_rows, i64 %m, i64 %n
  %few = icmp slt i64 %total, {parts}
  %parts = select i1 %few, i64 %total, i64 {parts}
  %context = alloca {record}, align 8
{stores}
  %pool = inttoptr i64 {pool} to ptr
  call i32 @mlirxla_pool_run(ptr %pool, ptr @gemm_part_{element}, ptr %context, i64 %parts, i64 %parts)
  ret void
}}
"""


BATCH_FIELDS = (("ta", "i32"), ("tb", "i32"), ("m", "i64"), ("n", "i64"), ("k", "i64"), ("a", "ptr"), ("lda", "i64"),
                ("b", "ptr"), ("ldb", "i64"), ("c", "ptr"), ("ldc", "i64"), ("stride_a", "i64"), ("stride_b", "i64"),
                ("stride_c", "i64"))


def gemm_batch_ir(element: str, routine: int, pool: int, parts: int) -> str:
    """`mlirxla_gemm_batch_<element>(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, batch, stride_a,
    stride_b, stride_c)`: c[i] = op(a[i]) op(b[i]) for i below `batch`, row-major, the matrices
    `stride_*` elements apart. A batch of `GEMM_SPLIT_WORK` multiply-adds or more that deals
    out evenly over the `parts` threads (a multiple of them, or at least four matrices a
    thread) runs whole matrices on each thread, each by the BLAS `routine` alone: splitting
    every matrix made one pool job and one synchronization per matrix, its halves half as
    efficient (an attention's 64 GEMMs of 256x256x64: 115-130 GFLOP/s where the large GEMMs
    beside them ran 180-200). Other batches run matrix by matrix through
    `mlirxla_gemm_<element>` (`batch_by_matrix` says which, for the executor)."""
    scalar = GEMM_ELEMENTS[element]
    kinds = [kind for _, kind in BATCH_FIELDS]
    record = f"%gemm_batch_{element}"

    def fields(verb: str) -> str:
        """Every field of the job's record loaded into its name, or stored from it."""
        return "\n".join(f"  %{name}_at = getelementptr {record}, ptr %context, i32 0, i32 {index}\n"
                         + (f"  %{name} = load {kind}, ptr %{name}_at" if verb == "load"
                            else f"  store {kind} %{name}, ptr %{name}_at")
                         for index, (name, kind) in enumerate(BATCH_FIELDS))

    def matrix(index: str) -> str:
        """%a_i, %b_i, %c_i: the pointers of matrix `index`."""
        return "\n".join(f"  %{x}_offset = mul i64 {index}, %stride_{x}\n"
                         f"  %{x}_i = getelementptr {scalar}, ptr %{x}, i64 %{x}_offset" for x in "abc")

    call = (f"i32 {ROW_MAJOR}, i32 %ta, i32 %tb, i64 %m, i64 %n, i64 %k, {scalar} 1.0, ptr %a_i, i64 %lda, ptr %b_i, "
            f"i64 %ldb, {scalar} 0.0, ptr %c_i, i64 %ldc")
    arguments = ", ".join(f"{kind} %{name}" for name, kind in BATCH_FIELDS[:11])
    return f"""
{record} = type {{ {", ".join(kinds)} }}

define internal void @gemm_matrix_{element}(ptr %context, i64 %index, i64 %part) {{
entry:
  %routine = inttoptr i64 {routine} to ptr
{fields("load")}
{matrix("%index")}
  call void %routine({call})
  ret void
}}

define void @mlirxla_gemm_batch_{element}({arguments}, i64 %batch, i64 %stride_a, i64 %stride_b, i64 %stride_c) {{
entry:
  %many = icmp sge i64 %batch, {4 * parts}
  %remainder = urem i64 %batch, {parts}
  %even = icmp eq i64 %remainder, 0
  %enough = icmp sge i64 %batch, {parts}
  %dealt = or i1 %many, %even
  %mn = mul i64 %m, %n
  %mnk = mul i64 %mn, %k
  %work = mul i64 %mnk, %batch
  %large = icmp sge i64 %work, {GEMM_SPLIT_WORK}
  %spread = and i1 %enough, %dealt
  %by_matrix = and i1 %spread, %large
  br i1 %by_matrix, label %pooled, label %each
pooled:
  %context = alloca {record}, align 8
{fields("store")}
  %pool = inttoptr i64 {pool} to ptr
  call i32 @mlirxla_pool_run(ptr %pool, ptr @gemm_matrix_{element}, ptr %context, i64 %batch, i64 {parts})
  ret void
each:
  %none = icmp sle i64 %batch, 0
  br i1 %none, label %out, label %loop
loop:
  %index = phi i64 [ 0, %each ], [ %next, %loop ]
{matrix("%index")}
  call void @mlirxla_gemm_{element}({call})
  %next = add i64 %index, 1
  %more = icmp slt i64 %next, %batch
  br i1 %more, label %loop, label %out
out:
  ret void
}}
"""


def slices_ir(arity: int) -> str:
    """`mlirxla_slices_<arity>(ctx, index, part)`: the kernel at ctx[0] called with `arity`
    pointers, the k-th ctx[1 + 3k] + index * ctx[2 + 3k] + part * ctx[3 + 3k] (its slice's
    rows, or its part's scratch)."""
    lines = [f"define void @mlirxla_slices_{arity}(ptr %context, i64 %index, i64 %part) {{", "entry:",
             "  %kernel = load ptr, ptr %context"]
    for k in range(arity):
        for role, offset in (("base", 1), ("step", 2), ("part_step", 3)):
            lines += [f"  %{role}{k}_at = getelementptr i64, ptr %context, i64 {3 * k + offset}",
                      f"  %{role}{k} = load i64, ptr %{role}{k}_at"]
        lines += [f"  %stepped{k} = mul i64 %index, %step{k}", f"  %parted{k} = mul i64 %part, %part_step{k}",
                  f"  %sum{k} = add i64 %base{k}, %stepped{k}", f"  %address{k} = add i64 %sum{k}, %parted{k}",
                  f"  %argument{k} = inttoptr i64 %address{k} to ptr"]
    lines += [f"  call void %kernel({', '.join(f'ptr %argument{k}' for k in range(arity))})", "  ret void", "}"]
    return "\n".join(lines) + "\n"


class NativePool:
    """The pool's words, its compiled code and its helper threads (`helpers` of them)."""

    def __init__(self, helpers: int):
        self.helpers = helpers
        self.words = (ctypes.c_int64 * int(Slot.WORDS))()
        self.words[Slot.SPIN_NS] = int(SPIN_S * 1e9)
        self.address = ctypes.addressof(self.words)
        routines = {element: ctypes.cast(blas.gemm(element), ctypes.c_void_p).value for element in GEMM_ELEMENTS}
        self.engine = compiled(pool_ir() + "".join(gemm_ir(element, routine, self.address, helpers + 1)
                                                   + gemm_batch_ir(element, routine, self.address, helpers + 1)
                                                   for element, routine in routines.items()))
        self.run_address = self.engine.get_function_address("mlirxla_pool_run")
        self.run_function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.c_int64, ctypes.c_int64)(self.run_address)
        self.gemms = {element: self.engine.get_function_address(f"mlirxla_gemm_{element}") for element in GEMM_ELEMENTS}
        self.gemm_batches = {element: self.engine.get_function_address(f"mlirxla_gemm_batch_{element}")
                             for element in GEMM_ELEMENTS}
        serve = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(self.engine.get_function_address("mlirxla_pool_serve"))
        for part in range(1, helpers + 1):
            threading.Thread(target=serve, args=(self.address, part), name=f"mlirxla-split-{part}", daemon=True).start()
        self.slices: dict[int, int] = {}
        self.slice_engines: list = []
        self.compiling = threading.Lock()

    def run(self, function: int, context: int, count: int, parts: int) -> bool:
        """fn(ctx, index, part) for every index below `count` on up to `parts` threads, the
        caller included; whether the helpers took part. ctypes releases the GIL for it."""
        return bool(self.run_function(self.address, function, context, count, parts))

    def slices_function(self, arity: int) -> int:
        """The address of `mlirxla_slices_<arity>`, compiled on first use."""
        with self.compiling:
            if arity not in self.slices:
                engine = compiled(slices_ir(arity))
                self.slice_engines.append(engine)  # the function's code lives as long as its engine
                self.slices[arity] = engine.get_function_address(f"mlirxla_slices_{arity}")
            return self.slices[arity]


_SHARED: list[NativePool] = []
_MAKING = threading.Lock()


def shared() -> NativePool:
    """The process's pool: a helper for each of `cpu_threads()` but the caller's."""
    with _MAKING:
        if not _SHARED:
            _SHARED.append(NativePool(cpu_threads() - 1))
        return _SHARED[0]


def pooled_gemm(element: str):
    """`mlirxla_gemm_<element>` typed as `blas.gemm(element)` is."""
    return blas.gemm_prototype(element)(shared().gemms[element])


def batch_by_matrix(m: int, n: int, k: int, batch: int, parts: int) -> bool:
    """Whether `mlirxla_gemm_batch_?` deals the batch's whole matrices out to `parts` threads
    (its IR's test, for the executor)."""
    dealt = batch >= parts and (batch % parts == 0 or batch >= 4 * parts)
    return dealt and m * n * k * batch >= GEMM_SPLIT_WORK


def gemm_spans_the_pool(m: int, n: int, k: int, batch: int, parts: int) -> bool:
    """Whether a GEMM in parts runs on every thread of the pool: split itself, or its batch
    dealt out by matrix."""
    return m * n * k >= GEMM_SPLIT_WORK or batch > 1 and batch_by_matrix(m, n, k, batch, parts)


def pooled_gemm_batch(element: str):
    """`mlirxla_gemm_batch_<element>`, typed for ctypes."""
    i32, i64, pointer = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    prototype = ctypes.CFUNCTYPE(None, i32, i32, i64, i64, i64, pointer, i64, pointer, i64, pointer, i64, i64, i64, i64, i64)
    return prototype(shared().gemm_batches[element])
