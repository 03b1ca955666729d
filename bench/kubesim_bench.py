"""kubesim throughput and watch-latency benchmark. Prints figures; never part of the tests.

Starts ``python -m kubesim --no-kubelet`` as a separate process, then measures requests per
second for create, get, patch and delete of batch/v1 Jobs with 1 and 8 concurrent keep-alive
connections (a minimal raw HTTP/1.1 client on asyncio, in this one separate process), the
server's CPU time per request, and the create → watch-event latency with 10,000 Jobs present.

    .venv/bin/python bench/kubesim_bench.py [--requests 2000] [--objects 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

NS = "bench"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
ROOT = Path(__file__).resolve().parents[1]


def job(name: str) -> bytes:
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"bench": "1"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "main", "image": "busybox:1.36"}]}}},
    }).encode()


class Client:
    """One blocking keep-alive connection (setup and the watch-latency probe)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: bytes | None = None,
             ctype: str = "application/json") -> tuple[int, bytes]:
        headers = {"Content-Type": ctype} if body is not None else {}
        self.conn.request(method, path, body=body, headers=headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()


def raw_request(method: str, path: str, body: bytes = b"", ctype: str = "application/json") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
    if body:
        head += f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


PATCH = json.dumps({"metadata": {"annotations": {"touched": "yes"}}}).encode()


def request_for(op: str, name: str) -> bytes:
    if op == "create":
        return raw_request("POST", JOBS, job(name))
    if op == "get":
        return raw_request("GET", f"{JOBS}/{name}")
    if op == "patch":
        return raw_request("PATCH", f"{JOBS}/{name}", PATCH, "application/merge-patch+json")
    return raw_request("DELETE", f"{JOBS}/{name}?propagationPolicy=Background")


async def read_response(reader: asyncio.StreamReader) -> int:
    """Read one whole response (a Content-Length body); its status code."""
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return int(status.split()[1])


async def connection(port: int, requests: list[bytes]) -> int:
    """One keep-alive client: send a request, read the whole response, repeat; returns failures."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    failures = 0
    for req in requests:
        writer.write(req)
        failures += await read_response(reader) >= 300
    writer.close()
    return failures


def run_op(port: int, op: str, names: list[str], clients: int) -> tuple[float, int]:
    """``clients`` concurrent keep-alive connections from this one process (a light raw-HTTP
    client, so the figure is the server's, not the client's)."""
    chunks = [[request_for(op, n) for n in names[i::clients]] for i in range(clients)]

    async def run() -> int:
        return sum(await asyncio.gather(*(connection(port, c) for c in chunks)))

    start = time.perf_counter()
    failures = asyncio.run(run())
    return len(names) / (time.perf_counter() - start), failures


def watch_latency(port: int, samples: int) -> list[float]:
    client = Client(port)
    _, body = client.call("GET", f"{JOBS}?limit=1")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    seen: dict[str, float] = {}
    ready = threading.Event()

    def reader() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", f"{JOBS}?watch=1&resourceVersion={rv}&labelSelector=lat%3D1")
        resp = conn.getresponse()
        ready.set()
        while len(seen) < samples:
            line = resp.readline()
            if not line:
                break
            event = json.loads(line)
            seen[event["object"]["metadata"]["name"]] = time.perf_counter()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    ready.wait(10)
    time.sleep(0.2)
    sent: dict[str, float] = {}
    for i in range(samples):
        name = f"lat-{i}"
        body = json.loads(job(name))
        body["metadata"]["labels"] = {"lat": "1"}
        sent[name] = time.perf_counter()
        client.call("POST", JOBS, json.dumps(body).encode())
        deadline = time.perf_counter() + 5
        while name not in seen and time.perf_counter() < deadline:
            time.sleep(0.0002)
    t.join(5)
    return [(seen[n] - sent[n]) * 1000 for n in sent if n in seen]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000, help="requests per operation and run")
    parser.add_argument("--objects", type=int, default=10_000, help="objects present for the watch test")
    args = parser.parse_args()
    load = os.getloadavg()
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--no-kubelet"],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(line.rsplit(":", 1)[1])
        Client(port).call("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": NS}}).encode())
        rows = []
        for clients in (1, 8):
            names = [f"c{clients}-{i}" for i in range(args.requests)]
            for op in ("create", "get", "patch", "delete"):
                cpu = cpu_seconds(proc.pid)
                rate, failures = run_op(port, op, names, clients)
                per_request = (cpu_seconds(proc.pid) - cpu) / len(names) * 1e6
                rows.append((op, clients, rate, failures, per_request))
        fill = [f"fill-{i}" for i in range(args.objects)]
        run_op(port, "create", fill, 8)
        latencies = watch_latency(port, 200)
    finally:
        proc.terminate()
        proc.wait(10)
    # The machine is shared and noisy: print what else was running alongside the figures.
    print("load average before/after: " + " / ".join(" ".join(f"{x:.2f}" for x in la) for la in (load, os.getloadavg())))
    print(f"{'operation':<10}{'clients':>8}{'req/s':>10}{'failed':>8}{'server CPU us/req':>19}")
    for op, clients, rate, failures, per_request in rows:
        print(f"{op:<10}{clients:>8}{rate:>10.0f}{failures:>8}{per_request:>19.0f}")
    if latencies:
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"watch latency with {args.objects} jobs present: p50 {statistics.median(latencies):.2f} ms, "
              f"p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms ({len(latencies)} samples)")


if __name__ == "__main__":
    main()
