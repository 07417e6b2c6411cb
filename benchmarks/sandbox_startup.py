"""Speed of the grading sandbox (``grader.sandbox``): prints a table.

    python benchmarks/sandbox_startup.py [--starts 20] [--jobs 2]

Rows: pool start (zygotes importing numpy/torch/...), fork-to-ready latency of one
submission, a full start -> request -> shutdown -> finish round trip, the same with
``--jobs`` submissions in flight, and how long a memory bomb takes to be classified.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.sandbox import Limits, SandboxPool, available_protections  # noqa: E402

ENTRY = b"""
import struct
def serve(sock):
    while True:
        head = sock.recv(4)
        if len(head) < 4:
            return
        n = struct.unpack("!I", head)[0]
        code = b""
        while len(code) < n:
            code += sock.recv(n - len(code))
        exec(code.decode(), {})
        sock.sendall(b"k")
"""
FILES = {"bench_entry.py": ENTRY}


def ask(sock, code: str) -> bytes:  # noqa: ANN001
    data = code.encode()
    sock.sendall(struct.pack("!I", len(data)) + data)
    return sock.recv(1)


def one_submission(pool: SandboxPool) -> tuple[float, float]:
    t0 = time.perf_counter()
    w = pool.start()
    ready = time.perf_counter() - t0
    ask(w.sock, "import torch; torch.ones(64, 64) @ torch.ones(64, 64)")
    w.sock.close()
    status = w.finish()
    assert status == "ok", status
    return ready, time.perf_counter() - t0


def row(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"| {name:<44} | {statistics.median(ms):9.1f} | {p90:9.1f} | {len(ms):3d} |"


def bench(isolation: str, starts: int, jobs: int) -> list[str]:
    lines = []
    t0 = time.perf_counter()
    pool = SandboxPool(
        jobs=jobs, isolation=isolation, entry="bench_entry:serve", worker_files=FILES
    )
    pool.open()
    lines.append(row(f"[{isolation}] pool start, {jobs} zygote(s)", [time.perf_counter() - t0]))
    try:
        one_submission(pool)  # warm-up
        results = [one_submission(pool) for _ in range(starts)]
        lines.append(row(f"[{isolation}] fork-to-ready", [r[0] for r in results]))
        lines.append(
            row(f"[{isolation}] start+request+finish, sequential", [r[1] for r in results])
        )
        with ThreadPoolExecutor(jobs) as ex:
            t0 = time.perf_counter()
            results = list(ex.map(lambda _: one_submission(pool), range(starts)))
            wall = time.perf_counter() - t0
        lines.append(
            row(f"[{isolation}] start+request+finish, {jobs} in flight", [r[1] for r in results])
        )
        lines.append(row(f"[{isolation}] wall per submission, {jobs} in flight", [wall / starts]))
        if "memory-cap" in pool.protections:
            w = pool.start(limits=Limits(memory_bytes=1 << 30))
            t0 = time.perf_counter()
            # bytearray touches pages faster than np.ones (transparent huge pages are slow
            # to fault in on these VMs: np.ones of 1 GiB takes ~2 s even unsandboxed)
            data = b"x = bytearray(6 << 30)"
            w.sock.sendall(struct.pack("!I", len(data)) + data)
            w.sock.recv(1)
            status = w.finish()
            lines.append(
                row(f"[{isolation}] memory bomb -> {status!r}", [time.perf_counter() - t0])
            )
    finally:
        pool.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(f"protections available here: {', '.join(available_protections())}\n")
    print(f"| {'measure':<44} | median ms |    p90 ms |   n |")
    print(f"|{'-' * 46}|{'-' * 11}|{'-' * 11}|{'-' * 5}|")
    for isolation in ("auto", "none"):
        for line in bench(isolation, args.starts, args.jobs):
            print(line, flush=True)


if __name__ == "__main__":
    main()
