#!/usr/bin/env python3
"""Round-trip latency of one read-only tool over raw stdio (no SDK in the way): start the
server, initialize, call the tool N times on one file, print the first call and the p50 of the
calls after 20 warm-up ones. A second harness beside `cargo bench --bench stdio`, for
alternating before/after runs of two binaries on a noisy machine (docs/benchmarks.md).

    python3 tests/python/info_latency.py --server /tmp/gdal-mcp-final --workspace target/testdata \
        --tool vector_info --input nc.gpkg --calls 1500
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    server = subprocess.Popen(
        [args.server, "serve", "--workspace", args.workspace],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, bufsize=1)

    def request(ident: int, method: str, params: dict) -> dict:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                                       "params": params}) + "\n")
        server.stdin.flush()
        while True:
            message = json.loads(server.stdout.readline())
            if message.get("id") == ident:
                return message

    request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "info_latency", "version": "1"}})
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    times = []
    answer: dict = {}
    for ident in range(1, args.calls + 1):
        start = time.perf_counter()
        answer = request(ident, "tools/call", {"name": args.tool, "arguments": {"input": args.input}})
        times.append((time.perf_counter() - start) * 1000)
    if answer.get("result", {}).get("isError"):
        raise SystemExit(f"{args.tool} failed: {answer}")
    print(f"{args.tool} {args.input}: first {times[0]:.2f} ms; p50 {statistics.median(times[20:]):.2f} ms "
          f"over {len(times) - 20} calls; result {len(json.dumps(answer))} bytes")
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
