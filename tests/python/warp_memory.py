#!/usr/bin/env python3
"""The server's peak memory (VmHWM growth) under N concurrent warps of one small file each
(attack round 19, R19-A5): `raster_resample` (`size` 200 x 200, nearest) of copies of a
149 KB DEFLATE-tiled 10000 x 10000 Byte GeoTIFF, under a 256 MiB shared budget, with
gdalwarp's working memory `--warp-memory` bytes (`GDAL_MCP_WARP_MEMORY_BYTES`). A benchmark,
not a test:

    python3 tests/python/warp_memory.py --server target/debug/gdal-mcp --calls 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading


def hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--warp-memory", type=int, default=16 << 20)
    args = parser.parse_args()
    workspace = tempfile.mkdtemp(prefix="warp-memory-")
    first = os.path.join(workspace, "t1.tif")
    subprocess.run(["gdal_create", "-q", "-of", "GTiff", "-outsize", "10000", "10000",
                    "-ot", "Byte", "-burn", "7", "-a_srs", "EPSG:32633",
                    "-a_ullr", "500000", "5100000", "600000", "5000000",
                    "-co", "TILED=YES", "-co", "COMPRESS=DEFLATE", first], check=True)
    for i in range(2, args.calls + 1):
        shutil.copy(first, os.path.join(workspace, f"t{i}.tif"))
    env = dict(os.environ, GDAL_MCP_MEMORY_BUDGET_BYTES=str(256 << 20),
               GDAL_MCP_WARP_MEMORY_BYTES=str(args.warp_memory))
    server = subprocess.Popen(
        [args.server, "serve", "--workspace", workspace],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, bufsize=1, env=env)
    answers: dict[int, dict] = {}
    arrived = threading.Condition()

    def reader() -> None:
        for line in server.stdout:
            message = json.loads(line)
            with arrived:
                answers[message.get("id")] = message
                arrived.notify_all()

    threading.Thread(target=reader, daemon=True).start()
    lock = threading.Lock()

    def send(message: dict) -> None:
        with lock:
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()

    def wait(ident: int) -> dict:
        with arrived:
            arrived.wait_for(lambda: ident in answers, timeout=300)
            return answers.get(ident, {})

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "warp_memory", "version": "1"}}})
    wait(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    before = hwm_kib(server.pid)
    for i in range(1, args.calls + 1):
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "raster_resample", "arguments": {
                "input": f"t{i}.tif", "output": f"o{i}.tif", "size": [200, 200],
                "resampling": "nearest"}}})
    answered = sum(1 for i in range(1, args.calls + 1)
                   if not wait(i).get("result", {}).get("isError", True))
    after = hwm_kib(server.pid)
    print(f"{args.calls} warps, -wm {args.warp_memory >> 20} MiB: {answered} answered, "
          f"VmHWM {before / 1024:.0f} -> {after / 1024:.0f} MiB "
          f"(+{(after - before) / 1024:.0f} MiB; budget 256 MiB)")
    server.stdin.close()
    server.wait()
    shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    main()
