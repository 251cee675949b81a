"""Registration throughput: a boot storm of workers calling registerWorker, then
reregisterWorker, through the real `taskcluster` client against `wm run web` (one OS process, as
production runs it), which verifies each worker's genuine identity proof and signs its temporary
credentials (Hawk, with a certificate signed by wm's issuer client); reregisterWorker comes back
Hawk-signed with those credentials, so the web process checks the certificate too.

Prepared beforehand, not timed: the web process on a fresh database, `workers` + `baseline`
EC2 workers (EC2 is 84 % of the production mix) launched through the real provider into the
simulated EC2 (rows in state requested, VMs running), and each VM's identity proof fetched from
the simulated metadata service as worker-runner fetches it.

Sides, in the same run and against the same web process:
- wm: `--concurrency` client threads sending as fast as the API takes them; a 429 or 503 is
  retried after the API's Retry-After (the client's exception carries no headers, so the
  API's documented delay, wm.api.errors.RETRY_AFTER_S), as worker-runner retries, and counted.
- baseline: one client, one call at a time, over `--baseline-workers` other workers: what one
  process answers with no concurrency at all (see bench/README.md for why this baseline).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import taskcluster
import taskcluster.exceptions

from bench.common import RESULTS_DIR, fresh_database
from bench.output import emit, percentile, ratios, rounded, table
from tests.support.api_stack import ApiStack, api_stack
from wm.api.errors import RETRY_AFTER_S
from wm.model import WorkerRecord
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.bootdata import MetadataError
from wmsim.gcp.gce import SimGce
from wmsim.postgres import PostgresServer, find_or_start

DEFAULT_WORKERS = 5000
DEFAULT_CONCURRENCY = 64
DEFAULT_BASELINE_WORKERS = 200
LAUNCH_CHUNK = 500  # workers per create call while preparing
PROOF_THREADS = 8
PROOF_ATTEMPTS = 5  # the metadata client's 2 s timeout can lapse while moto is busy
MAX_ATTEMPTS = 20  # a call still refused after this many 429/503 counts as failed
SEED = 20261205


@dataclass
class Tally:
    """What the clients saw, shared by the client threads."""

    register_s: list[float] = field(default_factory=list)
    reregister_s: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)  # "2xx", "429", "503", "5xx", ...
    failed: int = 0  # workers that did not get through both calls
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, status: str) -> None:
        with self.lock:
            self.statuses[status] += 1


def status_class(code: int) -> str:
    if code in (429, 503):
        return str(code)
    if code >= 500:
        return "5xx"
    if 200 <= code < 300:
        return "2xx"
    return "4xx"


def timed_call(tally: Tally, call: Callable[[], Any]) -> tuple[Any, float]:
    """One API call, retried after Retry-After on 429/503; (answer, seconds from the first try
    to the answer, retries' waits included: what the booting worker waits)."""
    started = time.monotonic()
    for _ in range(MAX_ATTEMPTS):
        try:
            answer = call()
        except taskcluster.exceptions.TaskclusterRestFailure as failure:
            code = failure.status_code or 500
            tally.count(status_class(code))
            if code in (429, 503):
                time.sleep(RETRY_AFTER_S)
                continue
            raise
        tally.count("2xx")
        return answer, time.monotonic() - started
    raise RuntimeError(f"still refused after {MAX_ATTEMPTS} attempts")


def boot(root_url: str, body: dict[str, Any], tally: Tally) -> None:
    """One worker's start: registerWorker with its proof, then reregisterWorker signed with the
    credentials it was given (worker-runner reregisters before they expire; here at once)."""
    anonymous = taskcluster.WorkerManager({"rootUrl": root_url, "maxRetries": 0})
    try:
        answer, register_s = timed_call(tally, lambda: anonymous.registerWorker(body))
        mine = taskcluster.WorkerManager(
            {"rootUrl": root_url, "maxRetries": 0, "credentials": dict(answer["credentials"])}
        )
        ids = {k: body[k] for k in ("workerPoolId", "workerGroup", "workerId")}
        _, reregister_s = timed_call(
            tally, lambda: mine.reregisterWorker({**ids, "secret": answer["secret"]})
        )
    except Exception:  # counted: the figures show how many workers did not get through
        with tally.lock:
            tally.failed += 1
        return
    with tally.lock:
        tally.register_s.append(register_s)
        tally.reregister_s.append(reregister_s)


def web_cpu_s(api: ApiStack) -> float:
    """The web process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{api.web.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def storm(api: ApiStack, bodies: Sequence[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """Every body booted on `concurrency` client threads; the side's figures."""
    tally = Tally()
    cpu_before = web_cpu_s(api)
    started = time.monotonic()
    if concurrency == 1:
        for body in bodies:
            boot(api.base_url, body, tally)
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda b: boot(api.base_url, b, tally), bodies))
    wall = time.monotonic() - started
    web_cpu = web_cpu_s(api) - cpu_before
    return figures(tally, len(bodies), wall, web_cpu)


def figures(tally: Tally, workers: int, wall: float, web_cpu: float) -> dict[str, Any]:
    register, reregister = sorted(tally.register_s), sorted(tally.reregister_s)
    done = len(register)
    return {
        "workers": workers,
        "registered": done,
        "failed": tally.failed,
        # one web process: per process is the whole
        "registrations_per_s": rounded(done / wall if wall else None, 1),
        "calls_per_s": rounded(tally.statuses["2xx"] / wall if wall else None, 1),
        "register_p50_s": rounded(percentile(register, 0.50)),
        "register_p95_s": rounded(percentile(register, 0.95)),
        "register_max_s": rounded(register[-1] if register else None),
        "reregister_p50_s": rounded(percentile(reregister, 0.50)),
        "reregister_p95_s": rounded(percentile(reregister, 0.95)),
        "reregister_max_s": rounded(reregister[-1] if reregister else None),
        "answers_2xx": tally.statuses["2xx"],
        "answers_429": tally.statuses["429"],
        "answers_503": tally.statuses["503"],
        "answers_5xx": tally.statuses["5xx"],
        "answers_4xx": tally.statuses["4xx"],
        "web_cpu_s": rounded(web_cpu, 2),
        "web_cpu_ms_per_worker": rounded(1000 * web_cpu / done if done else None, 2),
        "wall_s": rounded(wall, 2),
    }


@contextlib.contextmanager
def clouds() -> Iterator[dict[str, Any]]:
    """The three simulated clouds the web process trusts (it is configured with all three);
    only EC2 launches workers here."""
    ec2, gce, arm = SimEc2(seed=SEED).start(), SimGce(seed=SEED).start(), SimArm().start()
    try:
        yield {"aws": ec2, "gcp": gce, "azure": arm}
    finally:
        arm.stop()
        gce.stop()
        ec2.stop()


def prepare(api: ApiStack, count: int) -> list[dict[str, Any]]:
    """`count` EC2 workers launched (rows requested, VMs running) and their registerWorker
    bodies with genuine proofs."""
    workers: list[WorkerRecord] = []
    while len(workers) < count:
        workers += api.launch("aws", min(LAUNCH_CHUNK, count - len(workers)))

    def proof(worker: WorkerRecord) -> dict[str, Any]:
        for _ in range(PROOF_ATTEMPTS - 1):
            with contextlib.suppress(MetadataError):
                return api.proof(worker)
        return api.proof(worker)

    with ThreadPoolExecutor(PROOF_THREADS) as pool:
        proofs = list(pool.map(proof, workers))
    return [api.register_body(w, p) for w, p in zip(workers, proofs, strict=True)]


def run(
    workers: int, concurrency: int, baseline_workers: int, server: PostgresServer
) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="wm-bench-registration-") as tmp,
        fresh_database(server, "registration") as (_engine, db_url),
        clouds() as sims,
        api_stack(Path(tmp), db_url, sims, max_capacity=workers + baseline_workers) as api,
    ):
        print(f"preparing {workers + baseline_workers:,} workers ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        bodies = prepare(api, workers + baseline_workers)
        print(f"prepared in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        # The serial baseline first, on a quiet process; then the storm.
        print("running baseline ...", file=sys.stderr, flush=True)
        baseline = storm(api, bodies[workers:], 1)
        print("running wm ...", file=sys.stderr, flush=True)
        wm = storm(api, bodies[:workers], concurrency)
    return {
        "wm": wm,
        "baseline": baseline,
        "ratio": ratios(wm, baseline),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument("--baseline-workers", type=int, default=DEFAULT_BASELINE_WORKERS)
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "registration.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load = os.getloadavg()[0]
    print(
        f"boot storm of {args.workers:,} workers on {args.concurrency} client threads; "
        f"baseline: {args.baseline_workers:,} workers one call at a time",
        file=sys.stderr,
    )
    server = find_or_start()
    try:
        result = run(args.workers, args.concurrency, args.baseline_workers, server)
    finally:
        server.stop()
    result["params"] = {
        "workers": args.workers,
        "concurrency": args.concurrency,
        "baseline_workers": args.baseline_workers,
        "retry_after_s": RETRY_AFTER_S,
        "web_processes": 1,
        "cpus": os.cpu_count(),
        "load_before": load,
    }
    emit(result, table(result), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
