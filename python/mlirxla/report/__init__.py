"""See a compile and a run.

- `record.py`: what one compile told its listeners (`mlirxla.phases`): its phases, the
  pipeline runner (ledger, pass reports, the module), the module after every changing pass,
  the kernels' sources, the executable;
- `thunk_facts.py`: each thunk of an executable with the op it runs, its bytes, flops and
  estimated time, and the values flowing between thunks;
- `page.py`: the self-contained HTML report of one compile (`--report`), drawn by
  `timeline.py` (the passes), `graph.py` (the fusion graph, laid out by Graphviz),
  `heap.py` (the temp heap over the schedule) and `decisions.py` (the fusion decisions
  behind each kernel);
- `profile.py`: the thunks an execution ran and the phases of the compiles, as a Chrome
  trace (`--profile`, `MLIRXLA_PROFILE`) and a summary table; `xspace.py` hands the same
  events to jax's own profiler through the PJRT plugin;
- `progress.py`: the updating line of a long compile and the conformance progress bar;
- `xla_memory.py`: XLA:CPU's temp bytes for the same program, for the heap picture.

The compiler and the executor import nothing from here: they only announce
(`mlirxla.phases`, `runtime.thunks.observe`). The tools and the runtime's client use it:
the client shows progress and, when dumping, writes the report; the PJRT bridge starts the
MLIRXLA_PROFILE profile and serves jax's profiler (`xspace.py`). `docs/profiling.md` says
what each shows.
"""
