"""Instructions per stdio call, by difference (issue 19's latency check; a benchmark, not a test):
run the server under valgrind's callgrind with N and then 2N calls of one kind, after a warm-up
run under valgrind (wasmtime's compiled-component cache is keyed by the CPU valgrind emulates);
(Ir(2N) - Ir(N)) / N is the per-call count of instructions, which a shared 2-core VM does not
perturb as it does wall time. Needs valgrind and target/testdata (tests/fixtures/fetch-data.sh).
Usage: python3 tests/python/instructions_per_call.py BIN KIND N
       (KIND: raster_info | vector_info | gated)"""
import json, os, subprocess, sys, tempfile, shutil, re

BIN, KIND, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "target", "testdata")

def justification(method):
    return {"intent": "overlay the DEM with geographic basemap layers for a regional map",
            "alternatives": [
                {"method": "EPSG:3857 (Web Mercator)", "why_not": "the basemap tiles reproject on their own"},
                {"method": "bilinear", "why_not": "bilinear smooths the values"},
                {"method": "cubic", "why_not": "cubic overshoots next to sharp edges"}],
            "choice": {"method": method,
                       "rationale": "matches the analysis layers and the data's continuous nature; positions, areas and distances must survive for the regional map",
                       "tradeoffs": "sub-pixel smoothing; up to 1000 m of positional error and scale errors up to 500 % are accepted"},
            "confidence": "medium"}

CACHE = tempfile.mkdtemp(prefix="cg-cache-")
def warm():
    ws = tempfile.mkdtemp(prefix="cg-ws-")
    p = subprocess.Popen([BIN, "serve", "--workspace", ws, "--cache-dir", CACHE], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cg", "version": "0"}}}) + "\n")
    p.stdin.flush(); p.stdout.readline()
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}) + "\n")
    p.stdin.flush(); p.stdout.readline()
    p.stdin.close(); p.wait(timeout=600)
    shutil.rmtree(ws, ignore_errors=True)

def run(calls, vg=True):
    ws = tempfile.mkdtemp(prefix="cg-ws-")
    cache = CACHE
    for name in ["dem.tif", "nc.gpkg"]:
        shutil.copy(os.path.join(DATA, name), ws)
    # warm the component cache outside valgrind
    out = tempfile.mktemp(prefix="cg-out-")
    cmd = (["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] if vg else []) + [BIN,
           "serve", "--workspace", ws, "--cache-dir", cache]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    nid = [0]
    def req(method, params):
        nid[0] += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": nid[0], "method": method, "params": params}) + "\n")
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == nid[0]:
                return m
    req("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cg", "version": "0"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"); p.stdin.flush()
    def call(i):
        if KIND == "raster_info":
            args = {"input": os.path.join(ws, "dem.tif")}; name = "raster_info"
        elif KIND == "vector_info":
            args = {"input": os.path.join(ws, "nc.gpkg")}; name = "vector_info"
        else:
            name = "raster_resample"
            args = {"input": os.path.join(ws, "dem.tif"), "output": os.path.join(ws, f"g-{i}.tif"),
                    "resampling": "nearest", "resolution": [60, 60]}
        return req("tools/call", {"name": name, "arguments": args}), name, args
    if KIND == "gated":
        r, name, args = call(0)
        refusal = json.loads(r["result"]["content"][1]["text"])
        args["justification"] = {e["domain"]: justification("nearest") for e in refusal["refusal"]}
        r = req("tools/call", {"name": name, "arguments": args})
        assert r["result"]["isError"] is False, r
    for i in range(1, 11):
        r, _, _ = call(i)
        assert r["result"].get("isError") is False, r
    for i in range(11, 11 + calls):
        r, _, _ = call(i)
        assert r["result"].get("isError") is False, r
    p.stdin.close()
    p.wait(timeout=600)
    total = None
    if not vg:
        shutil.rmtree(ws, ignore_errors=True)
        return None
    with open(out) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    shutil.rmtree(ws, ignore_errors=True)
    for f in os.listdir(os.path.dirname(out)):
        if f.startswith(os.path.basename(out)):
            os.remove(os.path.join(os.path.dirname(out), f))
    return total

run(1); a = run(N); b = run(2 * N)
print(json.dumps({"bin": BIN, "kind": KIND, "n": N, "ir_n": a, "ir_2n": b, "ir_per_call": (b - a) / N}))
