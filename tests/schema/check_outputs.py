#!/usr/bin/python3
"""Every `--format json` document kpc prints validates against its schema in schemas/output/.

  check_outputs.py --kpc build/release/bin/kpc --root .

Runs each subcommand (validate, compile, simulate, golden, diff, verify, drift, trace, ipvs drain-plan) on the
example cluster (fixtures/example) and on a copy of it with one endpoint moved, in the cases
that give each document its interesting parts (differences with probabilities, a failing
program, warnings, an error), and checks for each run:

1. the exit code expected;
2. stdout is exactly one JSON document whose "schema" is kpc.dev/<kind>/v1 for the kind
   expected, and which validates against schemas/output/<kind>.schema.json;
3. its "diagnostics" list what the run printed on stderr (each coded stderr line is one entry);
4. every probability anywhere has the one shape (common.schema.json#/$defs/probability) and
   no document holds the old shapes ("p", a fraction string under "probability").

Also: every schema in schemas/output/ is valid draft 2020-12 and used by at least one run.
Needs only python3-jsonschema.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema

CODE_LINE = re.compile(r"(?:^|: )(error|warning)\[([EW][0-9]{4})\]")


def load_schemas(schema_dir):
    schemas = {}
    for name in sorted(os.listdir(schema_dir)):
        if name.endswith(".schema.json"):
            with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
                schemas[name] = json.load(f)
    for s in schemas.values():
        jsonschema.Draft202012Validator.check_schema(s)
    return schemas


def validator(schema, schemas):
    try:  # jsonschema >= 4.18
        import referencing
        import referencing.jsonschema
        registry = referencing.Registry().with_resources(
            (s["$id"], referencing.Resource.from_contents(s, default_specification=referencing.jsonschema.DRAFT202012))
            for s in schemas.values())
        return jsonschema.Draft202012Validator(schema, registry=registry)
    except ImportError:  # Debian 12's 4.10: RefResolver with a store keyed by $id
        store = {s["$id"]: s for s in schemas.values()}
        resolver = jsonschema.RefResolver.from_schema(schema, store=store)
        return jsonschema.Draft202012Validator(schema, resolver=resolver)


def walk(node, path="$"):
    if isinstance(node, dict):
        for k, v in node.items():
            yield path, k, v
            yield from walk(v, path + "." + k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s[%d]" % (path, i))


def make_cases(kpc, root, tmp):
    ex = os.path.join(root, "fixtures", "example")
    expected = os.path.join(ex, "expected")
    # new/: the example with shop/web's endpoint 10.244.2.6 moved to 10.244.2.7.
    new = os.path.join(tmp, "new")
    shutil.copytree(ex, new, ignore=shutil.ignore_patterns("expected"))
    p = os.path.join(new, "endpointslices.json")
    with open(p, encoding="utf-8") as f:
        text = f.read()
    assert "10.244.2.6" in text
    with open(p, "w", encoding="utf-8") as f:
        f.write(text.replace("10.244.2.6", "10.244.2.7"))
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w", encoding="utf-8") as f:
        f.write("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
                "spec:\n  clusterIP: 10.96.0.9\n  ports:\n  - {port: 70000}\n")
    warn = os.path.join(tmp, "warn")
    shutil.copytree(ex, warn, ignore=shutil.ignore_patterns("expected"))
    with open(os.path.join(warn, "orphan.yaml"), "w", encoding="utf-8") as f:  # W0005: an orphan slice
        f.write("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: orphan\n  namespace: shop\n"
                "  labels: {kubernetes.io/service-name: nosuch}\naddressType: IPv4\nendpoints: []\n")
    failing = os.path.join(tmp, "failing.restore")
    with open(failing, "w", encoding="utf-8") as f:
        f.write("*nat\n-A NO-SUCH-CHAIN -j ACCEPT\nCOMMIT\n")
    golden = os.path.join(tmp, "golden")
    v4 = os.path.join(expected, "iptables.restore")
    new_v4 = os.path.join(tmp, "new.restore")
    nft = os.path.join(expected, "nftables-ipv4.nft")
    J = ["--format", "json"]
    global failing_nft
    failing_nft = os.path.join(tmp, "failing.nft")
    drain = os.path.join(tmp, "ipvs-node")

    def write_ipvs_node():  # a node that still has a removed DNS endpoint under TCP and UDP, with counts
        os.makedirs(drain, exist_ok=True)
        with open(os.path.join(drain, "ipvs.save"), "w") as f:
            f.write("-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n"
                    "-A -u 10.96.0.10:53 -s rr\n-a -u 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n"
                    "-A -t 10.96.99.99:80 -s rr\n-a -t 10.96.99.99:80 -r 10.244.7.7:80 -m -w 1\n")
        with open(os.path.join(drain, "ipvs.stats"), "w") as f:
            f.write("TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 4 1\n")
    empty_node = os.path.join(tmp, "ipvs-empty-node")

    def write_empty_node():  # nothing the sync removes
        os.makedirs(empty_node, exist_ok=True)
        open(os.path.join(empty_node, "ipvs.save"), "w").close()

    broken_nft = os.path.join(tmp, "broken.nft")

    def write_broken_nft():  # kpc's nft program with one DNAT port changed
        with open(nft, encoding="utf-8") as f:
            text = f.read()
        with open(broken_nft, "w", encoding="utf-8") as f:
            f.write(text.replace("dnat to 10.244.1.5:8080", "dnat to 10.244.1.5:8081", 1))

    def write_failing_nft():  # a transaction nft refuses: a rule in a chain that does not exist
        with open(failing_nft, "w") as f:
            f.write("add table ip kube-proxy\nadd rule ip kube-proxy nosuch-chain counter\n")
    # (name, argv, exit code, kind, setup) — setup runs first (files the case reads).
    return [
        ("validate", ["validate", ex] + J, 0, "validate", None),
        ("validate warnings", ["validate", warn] + J, 0, "validate", None),
        ("validate invalid", ["validate", bad] + J, 2, "validate", None),
        ("compile", ["compile", ex] + J, 0, "compile", None),
        ("compile -o --stats", ["compile", new, "-o", new_v4, "--stats"] + J, 0, "compile", None),
        ("compile nftables", ["compile", ex, "--backend", "nftables", "--family", "ipv6"] + J, 0, "compile", None),
        ("compile fastpath", ["compile", ex, "--backend", "fastpath"] + J, 0, "compile", None),
        ("compile partial", ["compile", new, "--prior", ex] + J, 0, "compile", None),
        ("compile --node all", ["compile", ex, "--node", "all", "-o", os.path.join(tmp, "all")] + J, 0, "compile", None),
        ("compile ipvs", ["compile", ex, "--backend", "ipvs", "-o", os.path.join(tmp, "ipvs")] + J, 0, "compile", None),
        ("compile repair", ["compile", new, "--prior-state", v4] + J, 0, "compile", None),
        ("compile nft repair", ["compile", new, "--backend", "nftables", "--prior-state", nft] + J, 0, "compile", None),
        ("compile invalid", ["compile", bad] + J, 2, "error", None),
        ("compile unknown node", ["compile", ex, "--node", "nosuch"] + J, 2, "error", None),
        ("simulate", ["simulate", "--noflush", v4] + J, 0, "simulate", None),
        ("simulate fails", ["simulate", v4, failing] + J, 1, "simulate", None),
        ("simulate nftables", ["simulate", "--backend", "nftables", nft] + J, 0, "simulate", None),
        ("simulate missing file", ["simulate", os.path.join(tmp, "nosuch")] + J, 2, "error", None),
        ("golden update", ["golden", ex, "--expect", golden, "--update"] + J, 0, "golden", None),
        ("golden equal", ["golden", ex, "--expect", golden] + J, 0, "golden", None),
        ("golden differs", ["golden", new, "--expect", golden] + J, 1, "golden", None),
        ("diff equal", ["diff", v4, v4] + J, 0, "diff", None),
        ("diff", ["diff", ex, new] + J, 1, "diff", None),
        ("verify", ["verify", new, "--prior", ex] + J, 0, "verify", None),
        ("verify not equivalent", ["verify", "--state", v4, "--partial", new_v4, "--full", v4] + J, 1, "verify", None),
        # nftables input (issue 16): verify and diff of nft transactions.
        ("verify nftables", ["verify", "--state", os.path.join(root, "fixtures/nft-verify/prior.nft"), "--partial",
                             os.path.join(root, "fixtures/nft-verify/not-equivalent/partial.nft"), "--full",
                             os.path.join(root, "fixtures/nft-verify/not-equivalent/full.nft")] + J, 1, "verify", None),
        ("verify nftables fails", ["verify", "--state", os.path.join(root, "fixtures/nft-verify/prior.nft"),
                                   "--partial", os.path.join(root, "fixtures/nft-verify/fails-to-apply/partial.nft"),
                                   "--full", os.path.join(root, "fixtures/nft-verify/fails-to-apply/full.nft")] + J,
         1, "verify", None),
        ("diff nftables", ["diff", nft, os.path.join(root, "fixtures/nft-verify/prior.nft")] + J, 1, "diff", None),
        ("drift", ["drift", new, "--state", v4] + J, 1, "drift", None),
        # An nftables node: its listing against a full sync (every family the node runs).
        ("drift nftables", ["drift", ex, "--backend", "nftables", "--state", os.path.join(root, "fixtures/nft-verify/prior.nft")] + J,
         1, "drift", None),
        ("trace", ["trace", v4, "--src", "10.244.1.50", "--dst", "10.96.10.10", "--dport", "80", "--from", "pod"] + J,
         0, "trace", None),
        ("trace snapshot", ["trace", ex, "--src", "203.0.113.7", "--dst", "192.168.0.10", "--dport", "30080"] + J,
         0, "trace", None),
        ("trace kube-proxy-test", ["trace", v4, "--src", "10.244.1.50", "--dst", "10.96.10.10", "--dport", "80",
                                   "--kube-proxy-test"] + J, 0, "kube-proxy-trace", None),
        ("trace bad address", ["trace", v4, "--src", "nonsense", "--dst", "10.96.10.10", "--dport", "80"] + J,
         2, "error", None),
        # nftables input: the same trace document, with numgen's non-dyadic shares (1/N).
        ("trace nftables", ["trace", nft, "--src", "10.244.1.50", "--dst", "10.96.10.10", "--dport", "80",
                            "--from", "pod"] + J, 0, "trace", None),
        # Across back ends: iptables vs nftables programs of one snapshot (only known differences),
        # and a broken nft program (a DNAT port changed: not known, exit 1).
        ("diff across back ends", ["diff", ex, "--from-backend", "iptables", "--to-backend", "nftables",
                                   "--show-known"] + J, 0, "diff-cross", None),
        ("diff across back ends broken", ["diff", v4, broken_nft, "--local-address", "192.168.0.10"] + J, 1, "diff-cross", write_broken_nft),
        ("trace nftables snapshot", ["trace", ex, "--backend", "nftables", "--src", "203.0.113.7", "--dst",
                                     "192.168.0.10", "--dport", "30080"] + J, 0, "trace", None),
        # An IPVS program set (kpc compile --backend ipvs -o DIR): "backend": "ipvs", IPVS steps in the path.
        ("trace ipvs", ["trace", os.path.join(ex, "expected", "ipvs-ipv4"), "--src", "10.244.1.50", "--dst", "10.96.30.30", "--dport", "9000", "--from", "pod"] + J,
         0, "trace", None),
        ("trace ipvs snapshot", ["trace", ex, "--backend", "ipvs", "--src", "203.0.113.7", "--dst", "192.168.0.10",
                                 "--dport", "30080"] + J, 0, "trace", None),
        ("ipvs drain-plan", ["ipvs", "drain-plan", ex, "--prior-state", drain, "--kernel-version", "4.19"] + J,
         1, "ipvs-drain-plan", write_ipvs_node),
        ("ipvs drain-plan mode 1", ["ipvs", "drain-plan", ex, "--prior-state", drain, "--kernel-version", "4.19",
                                    "--sysctl", "net.ipv4.vs.conn_reuse_mode=1", "--sysctl",
                                    "net.ipv4.vs.expire_nodest_conn=0"] + J, 1, "ipvs-drain-plan", write_ipvs_node),
        ("ipvs drain-plan nothing", ["ipvs", "drain-plan", ex, "--prior-state", empty_node, "--kernel-version", "3.10"]
         + J, 0, "ipvs-drain-plan", write_empty_node),
        ("ipvs drain-plan missing dir", ["ipvs", "drain-plan", ex, "--prior-state", os.path.join(tmp, "nosuch")] + J,
         2, "error", None),
        ("trace nftables bad file", ["trace", failing_nft, "--src", "10.0.0.1", "--dst", "10.96.10.10",
                                     "--dport", "80"] + J, 2, "error", write_failing_nft),
    ]


failing_nft = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kpc", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    schemas = load_schemas(os.path.join(args.root, "schemas", "output"))
    validators = {name: validator(s, schemas) for name, s in schemas.items()}
    prob = validator({"$ref": "https://kpc.dev/schemas/output/common.schema.json#/$defs/probability"}, schemas)
    used, failures, runs = set(), [], 0
    with tempfile.TemporaryDirectory(prefix="kpc-outputs-") as tmp:
        for name, argv, want_rc, kind, setup in make_cases(args.kpc, args.root, tmp):
            runs += 1
            if setup:
                setup()
            r = subprocess.run([args.kpc] + argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
            where = "%s (kpc %s)" % (name, " ".join(argv))
            if r.returncode != want_rc:
                failures.append("%s: exit %d, expected %d\n%s" % (where, r.returncode, want_rc, r.stderr[-2000:]))
                continue
            try:
                doc = json.loads(r.stdout)
            except json.JSONDecodeError as e:
                failures.append("%s: stdout is not one JSON document: %s\n%s" % (where, e, r.stdout[:500]))
                continue
            if doc.get("schema") != "kpc.dev/%s/v1" % kind or next(iter(doc)) != "schema":
                failures.append("%s: \"schema\" (the first key) is %r, expected kpc.dev/%s/v1" %
                                (where, doc.get("schema"), kind))
                continue
            file = kind + ".schema.json"
            used.add(file)
            errs = sorted(validators[file].iter_errors(doc), key=lambda e: list(e.absolute_path))
            for e in errs[:5]:
                failures.append("%s: %s at %s" % (where, e.message[:300], "/".join(map(str, e.absolute_path))))
            if name == "trace nftables bad file":
                d = (doc.get("diagnostics") or [{}])[0]
                if d.get("file") != failing_nft or d.get("line") != 2 or d.get("column") != 24:
                    failures.append("%s: nft's error not located at %s:2:24: %r" % (where, failing_nft, d))
            coded = [m.group(2) for m in map(CODE_LINE.search, r.stderr.splitlines()) if m]
            listed = [d["code"] for d in doc.get("diagnostics", []) if d.get("code")]
            if sorted(coded) != sorted(listed):
                failures.append("%s: diagnostics %s, but stderr has %s" % (where, listed, coded))
            for path, key, value in walk(doc):
                if key == "p":
                    failures.append("%s: %s.p: the old probability shape" % (where, path))
                if key in ("probability", "total_probability"):
                    for e in prob.iter_errors(value):
                        failures.append("%s: %s.%s: not the one probability shape: %s" % (where, path, key, e.message))
    for name in schemas:
        if name != "common.schema.json" and name not in used:
            failures.append("schemas/output/%s: no run checked a document against it" % name)
    for f in failures:
        print("FAIL", f)
    print("%d runs, %d schemas used, %d failures" % (runs, len(used), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
