"""The compile report (`--report`), the profile (`--profile`, MLIRXLA_PROFILE) and the progress
line (`python/mlirxla/report/`).

The report of a run is read three ways: as HTML (its graph's nodes against the thunk sequence
the dump writes, each node's data, no address outside the file), in a headless Chromium
driven by Playwright (no console error, clicking a node shows its decisions, a screenshot in
the test's folder; skipped when no browser is installed), and the trace as JSON (the fields
the trace-event format requires, one event per thunk run).
"""

import glob
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import runtime_library
from mlirxla.mlir import ir
from mlirxla.pipelines.runner import RunOptions
from mlirxla.report import profile, progress
from mlirxla.runtime import driver
from mlirxla.tools import opt as opt_tool
from mlirxla.tools import run as run_tool

from .conftest import JAX_PROGRAMS, random_arguments

PROGRAM = os.path.join(JAX_PROGRAMS, "programs", "mlp_softmax_small.stablehlo.mlir")
TRANSFORMER = os.path.join(JAX_PROGRAMS, "programs", "transformer.stablehlo.mlir")
CONTROL_LINES = re.compile(r"^\s*(while |conditional |condition:|body:|branch \d+:)")
NODE = re.compile(r'<g id="thunk(?:-|&#45;)(\d+)" class="node thunk (kernel|library|copy)"')  # dot writes - as &#45;
REPORT_DATA = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)
EXTERNAL = re.compile(r"""(?:src|href|xlink:href)\s*=\s*["'](?!#)|@import|url\(\s*["']?(?!#)|<link\b""", re.I)

WHILE_LOOP = """
func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %five = stablehlo.constant dense<5> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<16xf32>
    cond {
      %p = stablehlo.compare LT, %i, %five : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %n = stablehlo.add %i, %one : tensor<i32>
      %w = stablehlo.tanh %v : tensor<16xf32>
      stablehlo.return %n, %w : tensor<i32>, tensor<16xf32>
    }
  return %r#1 : tensor<16xf32>
}
"""


def thunk_lines(dump: str) -> list[str]:
    """The thunks of the dump's thunk-sequence.txt that are graph nodes (loops and conditionals
    are clusters), nested ones included."""
    [path] = glob.glob(os.path.join(dump, "*.thunk-sequence.txt"))
    text = open(path).read()
    body = text[text.index("thunks:\n") + len("thunks:\n"):text.index("\noutputs:")]
    return [line.strip() for line in body.splitlines() if not CONTROL_LINES.match(line)]


def top_level_thunks(dump: str) -> int:
    [path] = glob.glob(os.path.join(dump, "*.thunk-sequence.txt"))
    text = open(path).read()
    body = text[text.index("thunks:\n") + len("thunks:\n"):text.index("\noutputs:")]
    return sum(1 for line in body.splitlines() if line.startswith("  ") and not line.startswith("   "))


def needs_graphviz() -> None:
    """The graph is laid out by Graphviz: without it the page says so instead."""
    if importlib.util.find_spec("graphviz") is None:
        pytest.skip("no graphviz Python package (pip install 'mlirxla[report]')")
    if shutil.which("dot") is None:
        pytest.skip("no Graphviz `dot` (apt-get install graphviz)")


def report_nodes(html: str) -> dict:
    return json.loads(REPORT_DATA.search(html).group(1))["nodes"]


@pytest.fixture(scope="module")
def run_report(tmp_path_factory):
    """`mlirxla-run --report --profile --repeat 2 --dump-to` of the small MLP: (folder, stdout)."""
    folder = tmp_path_factory.mktemp("report")
    argv = [PROGRAM, "--report", str(folder / "report.html"), "--profile", str(folder / "trace.json"), "--repeat", "2",
            "--dump-to", str(folder / "dump")]
    return folder, run_tool.main(argv)


def test_run_writes_report_and_trace(run_report):
    folder, status = run_report
    assert status == 0
    assert (folder / "report.html").stat().st_size > 0 and (folder / "trace.json").stat().st_size > 0


def test_report_graph_has_a_node_per_thunk_of_the_sequence(run_report):
    needs_graphviz()
    folder, _ = run_report
    html = (folder / "report.html").read_text()
    lines = thunk_lines(str(folder / "dump"))
    nodes = NODE.findall(html)
    assert len(nodes) == len(lines) > 0
    expected = {"kernel": sum(line.startswith(("kernel", "sliced kernel")) for line in lines),
                "library": sum(line.startswith(("gemm", "host", "collective")) for line in lines),
                "copy": sum(line.startswith(("copy", "parallel copy")) for line in lines)}
    assert {kind: sum(1 for _, k in nodes if k == kind) for kind in expected} == expected
    assert expected["library"] > 0  # the MLP's dots are BLAS calls


def copy_chain(count: int) -> tuple[list, list]:
    """The facts and flows of `count` copies, each reading the one before."""
    from mlirxla.report.thunk_facts import Flow, ThunkFacts
    from mlirxla.runtime.thunks import BufferSlice, CopyThunk

    facts = [ThunkFacts(index, CopyThunk(f"copy.{index}", BufferSlice(0, 16 * index, 16), BufferSlice(0, 16 * index + 16, 16)), None)
             for index in range(count)]
    return facts, [Flow(index - 1, index, 16, "") for index in range(1, count)]


def test_a_graph_too_large_or_too_slow_for_graphviz_is_left_out_with_the_reason(monkeypatch):
    """Past `LAYOUT_THUNKS` thunks the report does not ask Graphviz (a GPT training step's
    473 thunks took it past ten minutes, in every dumped compile); a layout past
    `LAYOUT_TIMEOUT_S` is cut off. Either way the page says why, in one line."""
    from mlirxla.errors import MlirxlaError
    from mlirxla.report import graph

    facts, flows = copy_chain(graph.LAYOUT_THUNKS + 1)
    with pytest.raises(MlirxlaError, match=f"the graph of {graph.LAYOUT_THUNKS + 1} thunks is left out: Graphviz lays out at most"):
        graph.render_svg(facts, flows)
    needs_graphviz()
    facts, flows = copy_chain(40)
    assert graph.render_svg(facts, flows).startswith("<svg")
    monkeypatch.setattr(graph, "LAYOUT_TIMEOUT_S", 1e-4)
    with pytest.raises(MlirxlaError, match="the graph of 40 thunks is left out: Graphviz's layout took over 0.0001 s"):
        graph.render_svg(facts, flows)


def test_every_node_has_its_decision_panel(run_report):
    needs_graphviz()
    folder, _ = run_report
    html = (folder / "report.html").read_text()
    data = report_nodes(html)
    assert set(data) == {f"thunk-{node}" for node, _ in NODE.findall(html)}
    for node in data.values():
        assert {"formed", "refused", "ops", "source", "kind", "bytes_in", "bytes_out", "estimate", "measured"} <= set(node)
        assert node["ops"] and node["measured"].endswith("x 2") and "GB/s" in node["achieved"]  # profiled over two runs
    kernels = [node for node in data.values() if node["category"] == "kernel"]
    # each kernel's StableHLO, or for a kernel the runtime library runs, its call
    assert all(node["source"].startswith("module") or runtime_library.called_functions(node["source"]) for node in kernels)
    assert any(node["formed"] for node in kernels) and any(node["refused"] for node in data.values())
    assert all(" at -:" not in line for node in data.values() for line in node["formed"] + node["refused"])


def test_report_is_self_contained(run_report):
    folder, _ = run_report
    html = (folder / "report.html").read_text()
    assert EXTERNAL.search(html) is None, EXTERNAL.search(html)
    assert "<script src" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', "")


def test_report_sections(run_report):
    folder, _ = run_report
    html = (folder / "report.html").read_text()
    changed = html.count('<tr class="changed">')
    assert changed > 0 and html.count('<details class="diff"') == changed  # a folded diff per changing pass
    assert 'class="heap"' in html and 'class="peak"' in html
    ledger_rows = html.count('<tr class="changed">') + html.count('<tr class="">')
    assert html.count('<rect class="bar pass"') == ledger_rows > 0  # a bar per pass run
    xla_row = re.search(r"<th>XLA:CPU temp bytes, same program</th><td>(.*?)</td>", html).group(1)
    if importlib.util.find_spec("jax") is None:
        assert "jax is not installed" in xla_row
    else:
        assert re.fullmatch(r"[\d.]+ (B|KiB|MiB|GiB)", xla_row), xla_row


def test_trace_has_the_required_fields_and_an_event_per_thunk_run(run_report):
    folder, _ = run_report
    trace = json.loads((folder / "trace.json").read_text())
    events = trace["traceEvents"]
    for event in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(event), event
        if event["ph"] == "X":
            assert event["dur"] >= 0
    thunk_events = [e for e in events if e["ph"] == "X" and e["cat"].startswith("thunk")]
    assert len(thunk_events) == 2 * top_level_thunks(str(folder / "dump"))  # --repeat 2, no loops
    assert all({"kind", "kernel", "bytes_in", "bytes_out", "flops", "worker"} <= set(e["args"]) for e in thunk_events)
    assert any(e["args"]["flops"] > 0 for e in thunk_events if e["args"]["kind"] == "gemm")
    categories = {e["cat"] for e in events if e["ph"] == "X"}
    assert {"compile,frontdoor", "compile,pass", "compile,kernel", "execution"} <= categories
    assert any(e["ph"] == "C" for e in events)


def test_thunk_runs_of_a_loop(context, tmp_path):
    """One event per thunk executed: the loop's own and its body's five times for a loop of
    five rounds (a counted loop: its trip count is proved, its condition never runs)."""
    module = frontdoor.import_text(WHILE_LOOP, "loop.mlir", context).module
    arguments = random_arguments(module)
    with profile.recording() as recorded:
        with context, ir.Location.unknown():
            executable, checks, types = driver.compile_entry(module, "main", RunOptions())
            driver.run_compiled(module, "main", executable, checks, types, arguments)
    plan = executable.plan
    [loop] = [thunk for thunk in plan.thunks if thunk.kind == "while"]
    assert loop.trip_count == 5
    expected = len(plan.thunks) + 5 * len(loop.body)
    recorded.write_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X" and e["cat"].startswith("thunk")) == expected


def test_summary_names_the_top_kernels(context):
    module = frontdoor.import_file(PROGRAM, context).module
    with profile.recording() as recorded:
        with module.context, ir.Location.unknown():
            driver.execute(module, random_arguments(module))
    text = recorded.summary()
    assert text.startswith("mlirxla profile: 1 execution(s)")
    assert "GB/s" in text and "GFLOP/s" in text and "gemm" in text


def test_opt_report_of_a_pipeline(tmp_path):
    needs_graphviz()
    path = tmp_path / "opt.html"
    assert opt_tool.main([PROGRAM, "--pipeline", "cpu", "--report", str(path), "-o", str(tmp_path / "out.mlir")]) == 0
    html = path.read_text()
    assert "its pipeline run (no backend)" in html
    assert html.count('<details class="diff"') == html.count('<tr class="changed">') > 0
    assert NODE.search(html) and EXTERNAL.search(html) is None


def test_opt_report_refuses_split_input(tmp_path, capsys):
    assert opt_tool.main([PROGRAM, "--split-input-file", "--report", str(tmp_path / "r.html")]) == 2
    assert "--report" in capsys.readouterr().err


# ---------------------------------------------------------------------- the browser

def chromium() -> str | None:
    for name in (os.environ.get("MLIRXLA_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no playwright (pip install 'mlirxla[report]')")
    binary = chromium()
    if binary is None:
        pytest.skip("no chromium (apt-get install chromium, or MLIRXLA_CHROMIUM=path)")
    return sync_playwright, binary


def open_in_browser(path: str, screenshot: str, expected_nodes: int) -> str:
    """Load the report, check it, click its first kernel node: the details panel's text."""
    sync_playwright, binary = browser_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport={"width": 1600, "height": 1100})
            errors = []
            tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            tab.on("pageerror", lambda error: errors.append(str(error)))
            tab.on("request", lambda request: errors.append(f"request {request.url}")
                   if not request.url.startswith(("file:", "data:", "about:")) else None)
            tab.goto("file://" + os.path.abspath(path))
            assert tab.locator(".graph g.node.thunk").count() == expected_nodes
            tab.locator(".graph g.node.thunk.kernel").first.click()
            details = tab.inner_text("#details")
            assert tab.locator(".graph g.node.selected").count() == 1
            tab.screenshot(path=screenshot, full_page=True)
            assert errors == []
            return details
        finally:
            browser.close()


def test_report_in_a_browser(run_report, tmp_path):
    needs_graphviz()
    folder, _ = run_report
    details = open_in_browser(str(folder / "report.html"), str(tmp_path / "report.png"),
                              len(thunk_lines(str(folder / "dump"))))
    assert "Formed by these fusion decisions" in details and "Merges it did not take" in details
    assert "bytes in" in details and "measured time" in details
    assert (tmp_path / "report.png").stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MLIRXLA_SCREENSHOTS"), reason="MLIRXLA_SCREENSHOTS=DIR asks for it")
def test_transformer_report_in_a_browser(tmp_path):
    """The transformer's report and its screenshot, kept in MLIRXLA_SCREENSHOTS (too slow for
    the default suite, where the small MLP's report is opened instead)."""
    needs_graphviz()
    folder = os.environ["MLIRXLA_SCREENSHOTS"]
    os.makedirs(folder, exist_ok=True)
    html, dump = os.path.join(folder, "transformer.html"), tmp_path / "dump"
    assert run_tool.main([TRANSFORMER, "--report", html, "--profile", os.path.join(folder, "transformer.trace.json"),
                          "--repeat", "5", "--dump-to", str(dump)]) == 0
    details = open_in_browser(html, os.path.join(folder, "transformer.png"), len(thunk_lines(str(dump))))
    assert "Formed by these fusion decisions" in details


# ---------------------------------------------------------------------- progress

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal(context, monkeypatch):
    monkeypatch.delenv("MLIRXLA_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal = Terminal()
    module = frontdoor.import_file(PROGRAM, context).module
    with progress.compiling("mlp", terminal, after_s=0.0, interval_s=0.005):
        with context, ir.Location.unknown():
            driver.compile_entry(module, "main", RunOptions())
    written = terminal.getvalue()
    assert "mlirxla: compiling mlp" in written and ("pass " in written or "kernel " in written)
    assert written.endswith(progress.CLEAR)  # wiped when the compile ends


def test_no_progress_when_piped(tmp_path):
    environment = {key: value for key, value in os.environ.items() if key != "MLIRXLA_PROGRESS"}
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", PROGRAM], capture_output=True, text=True,
                          env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr + done.stdout and "compiling" not in done.stderr


def test_conformance_bar(monkeypatch):
    monkeypatch.delenv("MLIRXLA_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal, out = Terminal(), io.StringIO()
    bar = progress.Bar(3, terminal, out)
    bar.add("passed")
    bar.add("failed")
    bar.above("FAIL a.mlir:@f: wrong")
    bar.add("passed")
    bar.close()
    assert "3/3" in terminal.getvalue() and "2 passed" in terminal.getvalue() and "1 failed" in terminal.getvalue()
    assert out.getvalue() == "FAIL a.mlir:@f: wrong\n"
    piped = io.StringIO()
    quiet = progress.Bar(1, piped, io.StringIO())
    quiet.add("passed")
    quiet.close()
    assert piped.getvalue() == ""


# ---------------------------------------------------------------------- the plugin

PLUGIN_PROGRAM = textwrap.dedent("""
    import jax, jax.numpy as jnp
    f = jax.jit(lambda w, x: jax.nn.softmax(jnp.tanh(x @ w) + 1.0), compiler_options={"xla_dump_to": DUMP})
    w, x = jnp.ones((32, 16)), jnp.ones((8, 32))
    for _ in range(3):
        f(w, x).block_until_ready()
    with jax.profiler.trace(JAX_TRACE):
        jax.jit(lambda x: jnp.exp(x) * 2)(x).block_until_ready()
        f(w, x).block_until_ready()
    print("ok")
""")


@pytest.mark.jax
def test_plugin_dumps_a_report_and_profiles(tmp_path):
    """In jax: xla_dump_to writes a report per module; MLIRXLA_PROFILE=DIR a trace of the
    process and the summary at exit; jax.profiler.trace gets the plugin's plane (through the
    PJRT profiler extension) while MLIRXLA_PROFILE records too."""
    pytest.importorskip("jax")
    from jax._src.lib import _profile_data

    dump, traces, jax_trace = tmp_path / "dump", tmp_path / "profile", tmp_path / "jax-trace"
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla", MLIRXLA_PROFILE=str(traces))
    script = f"DUMP, JAX_TRACE = {str(dump)!r}, {str(jax_trace)!r}\n" + PLUGIN_PROGRAM
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]

    reports = glob.glob(str(dump / "*.report.html"))
    assert len(reports) == len(glob.glob(str(dump / "*.before_optimizations.mlir"))) == 1
    assert NODE.search(open(reports[0]).read()) or shutil.which("dot") is None

    [trace] = glob.glob(str(traces / "mlirxla-*.trace.json"))
    events = json.load(open(trace))["traceEvents"]
    executions = [e for e in events if e["ph"] == "X" and e["cat"] == "execution" and "jit__lambda" in e["name"]]
    assert len(executions) == 5  # f four times, the exp program once
    assert "mlirxla profile:" in done.stderr and "GFLOP/s" in done.stderr

    [xplane] = glob.glob(str(jax_trace / "**" / "*.xplane.pb"), recursive=True)
    [plane] = [p for p in _profile_data.ProfileData.from_file(xplane).planes if "mlirxla" in p.name]
    found = [event for line in plane.lines for event in line.events]
    assert sum(event.name.startswith("execute ") for event in found) == 2
    assert any(event.name == "pipeline cpu" for event in found)  # the exp program compiled inside the trace
    thunks = [event for event in found if "kind" in dict(event.stats)]
    assert thunks and all({"kernel", "bytes_in", "bytes_out", "flops"} <= set(dict(event.stats)) for event in thunks)


@pytest.mark.jax
def test_xspace_encodes_what_was_recorded(context):
    """The XSpace the plugin hands jax, read back by jax's own reader: an event per thunk run
    with its stats, and the compile's phases."""
    pytest.importorskip("jax")
    from jax._src.lib import _profile_data as profile_data

    from mlirxla.report import xspace

    feed = xspace.JaxProfilerFeed()
    feed.start()
    module = frontdoor.import_file(PROGRAM, context).module
    with context, ir.Location.unknown():
        executable, checks, types = driver.compile_entry(module, "main", RunOptions())
        driver.run_compiled(module, "main", executable, checks, types, random_arguments(module), repeat=3)
    feed.stop()
    [plane] = profile_data.ProfileData.from_serialized_xspace(feed.collect()).planes
    assert plane.name == xspace.PLANE_NAME
    found = [event for line in plane.lines for event in line.events]
    thunks = [event for event in found if "kind" in dict(event.stats)]
    assert len(thunks) == 3 * len(executable.plan.thunks)
    assert {"pipeline cpu", "execute jit_mlp"} <= {event.name for event in found}
    gemm = next(dict(event.stats) for event in thunks if dict(event.stats)["kind"] == "gemm")
    assert gemm["flops"] > 0 and gemm["kernel"].startswith("BLAS")
