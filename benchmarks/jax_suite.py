"""JAX's own tests on mlirxla: the same test files run once on jax's cpu backend and once on
the plugin, matched by pytest node id.

    python benchmarks/jax_suite.py --tests ~/jax/tests            # the five files of issue 11
    python benchmarks/jax_suite.py --tests DIR --files fft_test.py --reuse cpu
    python benchmarks/jax_suite.py --tests DIR --failures         # list what fails on mlirxla
    python benchmarks/jax_suite.py --tests DIR --files linalg_sharding_test.py --as-cpu   # cpu-only cases too

`--tests` is the `tests/` folder of jax-ml/jax at tag `jax-v0.10.2` (the installed jax's
version; fetch it, never commit it; `MLIRXLA_JAX_TESTS` works too). Needs the `jax-suite` extra
(`scripts/setup jax,jax-suite`). Each platform's outcomes are written as JUnit XML under
`--results` (default `jax-suite-results/`), so one platform can be rerun alone while the
other is reused (`--reuse cpu`). A case counts against mlirxla when it passes on cpu and
fails, errors or is skipped on mlirxla. With `JAX_NUM_GENERATED_CASES=2` (the default here)
the five files hold about 1,900 cases.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

FILES = ["lax_test.py", "lax_numpy_test.py", "lax_numpy_indexing_test.py", "lax_vmap_test.py", "fft_test.py"]
PLATFORMS = ("cpu", "mlirxla")
# pytest with jax's test utilities told that the device under test is a cpu (`jax_test_dut`,
# a flag of jax's test_util that pytest's command line cannot set): a case that
# `jtu.run_on_devices("cpu")` keeps to jax's cpu backend runs on the plugin instead of skipping
AS_CPU = ("import sys, jax, pytest; from jax._src import test_util; "
          "jax.config.update('jax_test_dut', 'cpu'); sys.exit(pytest.main(sys.argv[1:]))")


@dataclass
class Outcomes:
    """node id -> 'passed' | 'failed' | 'error' | 'skipped', and the message of each non-pass."""

    status: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)


def results_path(results: str, platform: str, file: str) -> str:
    return os.path.join(results, f"{platform}-{file.removesuffix('.py')}.xml")


def run_file(tests: str, file: str, platform: str, results: str, arguments: argparse.Namespace) -> float:
    """Run one test file on one platform; the seconds it took."""
    environment = dict(os.environ, JAX_PLATFORMS=platform, JAX_NUM_GENERATED_CASES=str(arguments.cases))
    runner = ["-c", AS_CPU] if arguments.as_cpu and platform == "mlirxla" else ["-m", "pytest"]
    command = [sys.executable, *runner, file, "-q", "-p", "no:cacheprovider", "--junitxml",
               os.path.abspath(results_path(results, platform, file)), f"--timeout={arguments.timeout}"]
    if arguments.jobs > 1:
        command += ["-n", str(arguments.jobs)]
    if arguments.k:
        command += ["-k", arguments.k]
    start = time.perf_counter()
    subprocess.run(command, cwd=tests, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def read_outcomes(path: str, file: str) -> Outcomes:
    outcomes = Outcomes()
    if not os.path.exists(path):
        return outcomes
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        class_name = case.get("classname", "").rsplit(".", 1)[-1]
        node = f"{file}::{class_name}::{case.get('name')}"
        status, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                message = (child.get("message") or child.text or "").strip().splitlines()[0][:300] if (child.get("message") or child.text) else ""
                break
        outcomes.status[node] = status
        outcomes.messages[node] = message
    return outcomes


def compare(cpu: Outcomes, mlirxla: Outcomes) -> tuple[list[str], list[str]]:
    """(cases passing on cpu, those of them not passing on mlirxla)."""
    passing = sorted(node for node, status in cpu.status.items() if status == "passed")
    lost = [node for node in passing if mlirxla.status.get(node, "missing") != "passed"]
    return passing, lost


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", default=os.environ.get("MLIRXLA_JAX_TESTS"), help="jax's tests/ folder at tag jax-v0.10.2")
    parser.add_argument("--files", nargs="+", default=FILES)
    parser.add_argument("--results", default="jax-suite-results")
    parser.add_argument("--reuse", nargs="*", default=[], choices=PLATFORMS, help="read these platforms' earlier results instead of running them")
    parser.add_argument("--cases", type=int, default=2, help="JAX_NUM_GENERATED_CASES")
    parser.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers per run")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a single case may take")
    parser.add_argument("-k", help="pytest -k expression, to run a slice")
    parser.add_argument("--failures", action="store_true", help="list every case lost on mlirxla with its message")
    parser.add_argument("--json", help="write the table and the lost cases as JSON")
    parser.add_argument("--as-cpu", action="store_true",
                        help="on the plugin side, jax's test utilities take the device for a cpu (jax_test_dut=cpu): "
                             "cases that run on the cpu only (run_on_devices('cpu')) run on mlirxla instead of skipping")
    arguments = parser.parse_args(argv)
    if not arguments.tests or not os.path.isdir(arguments.tests):
        print("jax_suite: give --tests, the tests/ folder of jax-ml/jax at tag jax-v0.10.2 (or set MLIRXLA_JAX_TESTS)", file=sys.stderr)
        return 2
    os.makedirs(arguments.results, exist_ok=True)
    rows, lost_cases, seconds = [], {}, {}
    for file in arguments.files:
        outcomes = {}
        for platform in PLATFORMS:
            if platform not in arguments.reuse:
                seconds[(platform, file)] = run_file(arguments.tests, file, platform, arguments.results, arguments)
            outcomes[platform] = read_outcomes(results_path(arguments.results, platform, file), file)
        passing, lost = compare(outcomes["cpu"], outcomes["mlirxla"])
        rows.append((file, len(passing), len(passing) - len(lost)))
        lost_cases[file] = {node: f"{outcomes['mlirxla'].status.get(node, 'missing')}: {outcomes['mlirxla'].messages.get(node, '')}" for node in lost}
    print(f"{'file':32} {'cpu passes':>10} {'mlirxla':>8} {'share':>8}")
    for file, passing, kept in rows:
        share = 100.0 * kept / passing if passing else 100.0
        print(f"{file:32} {passing:10d} {kept:8d} {share:7.2f}%")
    total, kept = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'all':32} {total:10d} {kept:8d} {100.0 * kept / max(total, 1):7.2f}%")
    for (platform, file), took in sorted(seconds.items()):
        print(f"  {platform} {file}: {took:.0f} s")
    if arguments.failures:
        for file, cases in lost_cases.items():
            for node, why in cases.items():
                print(f"{node}: {why}")
    if arguments.json:
        with open(arguments.json, "w") as stream:
            json.dump({"rows": rows, "lost": lost_cases}, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
