#!/usr/bin/env python3
"""Churn soak and one-change latency of kpc-applier (issue 15 §4, §5; docs/performance.md).

Runs kpc-applier (`--watch -`, legacy iptables unless --iptables nft, IPv4) inside the network namespace it is started
in (scripts/soak.sh makes one), feeds it kubectl-style watch events of a synthetic cluster
(SERVICES Services, ENDPOINTS endpoints each, one EndpointSlice per Service), then either
  --mode churn : RATE changes/s for DURATION s (90% an EndpointSlice's endpoint replaced,
                 5% a Service added with its slice, 5% one deleted), or
  --mode single: one EndpointSlice change every GAP s, COUNT times (the §5 figure).
It records, per sync, the applier's own log line (kind, compile/verify/apply ms) with the time
it arrived, and per change the event -> kernel latency: from the moment the event was written
to the pipe to the end of the first sync that started after it (sync start = its log line's
arrival minus compile+verify+apply); in churn mode also from the change's scheduled time (a write
blocks while kpc-applier syncs, as it reads stdin between syncs only). RSS of kpc-applier is sampled every 5 s. Also scraped:
kubeproxy_network_programming_duration_seconds (trigger-time annotation -> sync applied).
Prints a JSON summary on stdout; the raw records go to --out DIR.
"""
import argparse, json, os, random, subprocess, sys, threading, time, urllib.request
from datetime import datetime, timezone

CONFIG = """apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: %(mode)s
hostnameOverride: node-0
clusterCIDR: 10.0.0.0/8
%(mode)s:
  minSyncPeriod: 1s
  syncPeriod: 30s
---
apiVersion: kpc.dev/v1alpha1
kind: NodeEnvironment
interfaces:
- name: lo
  addresses: [127.0.0.1/8]
- name: eth0
  addresses: [192.168.0.2/24]
"""

def rfc3339(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

def svc_ip(i):
    return "172.30.%d.%d" % (i // 250, i % 250 + 1)

def ep_ip(i, j, gen):
    return "10.%d.%d.%d" % (1 + (i // 250) % 200, i % 250, (j * 7 + gen) % 250 + 1)

def service(i, etype="ADDED"):
    ip = svc_ip(i)
    return {"type": etype, "object": {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc-%d" % i, "namespace": "ns-%d" % (i % 100), "resourceVersion": "1"},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "type": "ClusterIP",
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}}

def slice_(i, n, gen, etype="ADDED", trigger=None):
    md = {"name": "svc-%d-abcde" % i, "namespace": "ns-%d" % (i % 100), "resourceVersion": str(gen + 1),
          "labels": {"kubernetes.io/service-name": "svc-%d" % i}}
    if trigger is not None:
        md["annotations"] = {"endpoints.kubernetes.io/last-change-trigger-time": rfc3339(trigger)}
    return {"type": etype, "object": {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": md,
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ep_ip(i, j, gen)], "conditions": {"ready": True}, "nodeName": "node-%d" % (j % 50)}
                          for j in range(n)],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--applier", required=True)
    ap.add_argument("--mode", choices=["churn", "single"], default="churn")
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--rate", type=float, default=50)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--gap", type=float, default=5)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--verify", default="always")
    ap.add_argument("--iptables", default="legacy", choices=["legacy", "nft"], help="the iptables flavour")
    ap.add_argument("--proxy-mode", default="iptables", choices=["iptables", "nftables"],
                    help="KubeProxyConfiguration.mode (nftables: `nft -f -` of kube-proxy's nftables transactions)")
    ap.add_argument("--apply-with", default="tools", choices=["tools", "in-process"],
                    help="kpc-applier --apply-with (in-process: nftables as netlink batches)")
    ap.add_argument("--metrics-port", type=int, default=10249)
    ap.add_argument("--out", default="/tmp/kpc-soak")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = os.path.join(a.out, "config.yaml")
    open(cfg, "w").write(CONFIG % {"mode": a.proxy_mode})
    argv = [a.applier, "--watch", "-", "--config", cfg, "--iptables", a.iptables, "--family", "ipv4",
            "--verify", a.verify, "--apply-with", a.apply_with, "--metrics-bind-address", "127.0.0.1:%d" % a.metrics_port,
            "--healthz-bind-address", "", "--state-dir", os.path.join(a.out, "state")]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    syncs, drift, other = [], [], []
    lock = threading.Lock()

    def reader():
        for line in p.stderr:
            t = time.time()
            try:
                j = json.loads(line)
            except ValueError:
                continue
            with lock:
                if j.get("msg") == "sync":
                    j["t_end"] = t
                    j["t_start"] = t - (j.get("compile_ms", 0) + j.get("verify_ms", 0) + j.get("apply_ms", 0) +
                                        j.get("drift_ms", 0)) / 1000.0
                    syncs.append(j)
                elif j.get("msg") == "drift check":
                    j["t"] = t
                    drift.append(j)
                else:
                    j["t"] = t
                    other.append(j)
    threading.Thread(target=reader, daemon=True).start()
    rss = []

    def sampler():
        while p.poll() is None:
            try:
                for l in open("/proc/%d/status" % p.pid):
                    if l.startswith("VmRSS:"):
                        rss.append((time.time(), int(l.split()[1])))
            except OSError:
                pass
            time.sleep(5)
    threading.Thread(target=sampler, daemon=True).start()

    def write(ev):
        p.stdin.write((json.dumps(ev, separators=(",", ":")) + "\n").encode())

    t0 = time.time()
    gens = {}
    for i in range(a.services):
        write(service(i))
        write(slice_(i, a.endpoints, 0))
        gens[i] = 0
    p.stdin.flush()
    # Wait for the first (full) sync.
    while True:
        with lock:
            if syncs:
                break
        if p.poll() is not None:
            sys.exit("kpc-applier exited: %s" % p.returncode)
        time.sleep(0.2)
    first = syncs[0]
    time.sleep(3)
    events = []  # (t_written, kind)
    rnd = random.Random(1)
    next_id = a.services
    live = set(range(a.services))
    pool = list(live)
    start = time.time()
    if a.mode == "churn":
        n = 0
        while time.time() - start < a.duration:
            due = start + n / a.rate
            now = time.time()
            if due > now:
                time.sleep(due - now)
            r = rnd.random()
            t = time.time()
            if r < 0.90:
                i = rnd.choice(pool)
                gens[i] += 1
                write(slice_(i, a.endpoints, gens[i], "MODIFIED", trigger=t))
                kind = "slice"
            elif r < 0.95:
                i = next_id
                next_id += 1
                gens[i] = 0
                write(service(i))
                write(slice_(i, a.endpoints, 0, "ADDED", trigger=t))
                live.add(i)
                pool.append(i)
                kind = "service-add"
            else:
                i = rnd.choice(pool)
                live.discard(i)
                pool.remove(i)
                write(service(i, "DELETED"))
                write(slice_(i, a.endpoints, gens[i], "DELETED"))
                kind = "service-delete"
            p.stdin.flush()
            events.append((t, kind))
            n += 1
    else:
        for k in range(a.count):
            time.sleep(a.gap)
            i = rnd.randrange(a.services)
            gens[i] += 1
            t = time.time()
            write(slice_(i, a.endpoints, gens[i], "MODIFIED", trigger=t))
            p.stdin.flush()
            events.append((t, "slice"))
    time.sleep(5)
    try:
        metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % a.metrics_port, timeout=10).read().decode()
    except Exception as e:  # noqa
        metrics = "unavailable: %s" % e
    p.terminate()
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:  # e.g. the drift thread still reading a 10,000-Service table
        other.append({"msg": "soak: kpc-applier did not exit within 60 s of SIGTERM: killed"})
        p.kill()
        p.wait()
    time.sleep(0.5)
    with lock:
        ss = [s for s in syncs if s.get("result") == "applied"]
    # event -> kernel: the first applied sync that started after the event was written.
    # The same from the change's scheduled time (churn: start + n / rate): the applier reads stdin
    # between syncs only, so a blocked write delays the event before the applier can see it.
    sched = []
    j = 0
    if a.mode == "churn":
        for n, (t, kind) in enumerate(events):
            while j < len(ss) and ss[j]["t_start"] < t:
                j += 1
            if j < len(ss):
                sched.append(ss[j]["t_end"] - (start + n / a.rate))
    lat = []
    queue, own = [], []  # the split of each change's latency: waiting for its sync to start, the sync itself
    j = 0
    for (t, kind) in events:
        while j < len(ss) and ss[j]["t_start"] < t:
            j += 1
        if j < len(ss):
            lat.append((ss[j]["t_end"] - t, kind))
            queue.append(ss[j]["t_start"] - t)
            own.append(ss[j]["t_end"] - ss[j]["t_start"])
    def pct(v, q):
        v = sorted(v)
        return round(v[min(len(v) - 1, int(q * len(v)))], 3) if v else None
    window = [s for s in ss if s["t_end"] >= start]
    def med(key, kind):
        return pct([s.get(key, 0) for s in window if s["kind"] == kind], 0.5)
    summary = {
        "mode": a.mode, "proxy_mode": a.proxy_mode, "iptables": a.iptables, "services": a.services, "endpoints_per_service": a.endpoints, "verify": a.verify,
        "initial_list_to_first_sync_s": round(first["t_end"] - t0, 2),
        "first_sync": {k: first.get(k) for k in ("kind", "bytes", "compile_ms", "apply_ms")},
        "changes": len(events), "seconds": round((events[-1][0] - start) if events else 0, 1),
        "latency_s": {"p50": pct([x for x, _ in lat], 0.5), "p90": pct([x for x, _ in lat], 0.9),
                      "p99": pct([x for x, _ in lat], 0.99), "max": pct([x for x, _ in lat], 1.0),
                      "n": len(lat)},
        "latency_split_p50_s": {"queueing": pct(queue, 0.5), "sync": pct(own, 0.5)},
        "latency_from_schedule_s": {"p50": pct(sched, 0.5), "p90": pct(sched, 0.9), "p99": pct(sched, 0.99),
                                    "n": len(sched)},
        "syncs": {"full": sum(1 for s in window if s["kind"] == "full"),
                  "partial": sum(1 for s in window if s["kind"] == "partial"),
                  "failed": sum(1 for s in syncs if s.get("result") == "failed"),
                  "fallbacks": sum(1 for s in window if s.get("fallback"))},
        "partial_ms_p50": {"compile": med("compile_ms", "partial"), "verify": med("verify_ms", "partial"),
                           "apply": med("apply_ms", "partial")},
        "partial_ms_p99": {k: pct([s.get(k + "_ms", 0) for s in window if s["kind"] == "partial"], 0.99)
                           for k in ("compile", "verify", "apply")},
        "services_changed_per_partial_p50": pct([s.get("services_changed", 0) for s in window if s["kind"] == "partial"], 0.5),
        "bytes_per_partial_p50": pct([s.get("bytes", 0) for s in window if s["kind"] == "partial"], 0.5),
        "drift_checks": [{k: d.get(k) for k in ("result", "drift_ms")} for d in drift],
        "rss_mb": [(round(t - start), round(kb / 1024)) for t, kb in rss[::max(1, len(rss) // 15)]],
        "rss_mb_max": round(max((kb for _, kb in rss), default=0) / 1024),
    }
    for line in metrics.splitlines():
        les = ('le="0.25"', 'le="0.5"', 'le="1"', 'le="2"', 'le="3"', 'le="5"', 'le="10"', 'le="+Inf"')
        if (line.startswith("kubeproxy_network_programming_duration_seconds_bucket") and any(x in line for x in les)) or \
           line.startswith("kubeproxy_network_programming_duration_seconds_count"):
            summary.setdefault("network_programming_metric", []).append(line)
    json.dump({"summary": summary, "syncs": syncs, "drift": drift, "other": other, "events": events, "rss": rss},
              open(os.path.join(a.out, "records.json"), "w"))
    print(json.dumps(summary, indent=1))

if __name__ == "__main__":
    main()
