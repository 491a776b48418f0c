#!/usr/bin/python3
"""The default text of kpc diff, verify, drift and trace is for a reviewer (issue 13 §5).

  check_text_reports.py --kpc build/release/bin/kpc --root .

Runs each on the example cluster (fixtures/example) and on a copy with one endpoint moved, and
checks that no line of stdout is wider than 100 columns and that none of the comparison's own
words appears (destination atoms, leaves, start classes, the engine's interface names
kpc-other0 / <prefix>kpc0, the narrowing) — while with --verbose they do appear (so the check
is not vacuous), and every report still says what changed for the Service.

Also (§6): option values are validated — a negative or non-numeric count is a usage error
(exit 2, the option named), never taken as 2^64-1.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

WIDTH = 100
INTERNAL = re.compile(r"\batoms?\b|\bleaves\b|start class|kpc-other0|kpc0\b|narrowing|semantic hash")


def columns(line):
    return len(line)  # str: code points (the reports use a few non-ASCII arrows and dashes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kpc", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    kpc, root = args.kpc, args.root
    ex = os.path.join(root, "fixtures", "example")
    v4 = os.path.join(ex, "expected", "iptables.restore")
    failures = []
    with tempfile.TemporaryDirectory(prefix="kpc-text-") as tmp:
        new = os.path.join(tmp, "new")
        shutil.copytree(ex, new, ignore=shutil.ignore_patterns("expected"))
        p = os.path.join(new, "endpointslices.json")
        with open(p, encoding="utf-8") as f:
            text = f.read()
        with open(p, "w", encoding="utf-8") as f:
            f.write(text.replace("10.244.2.6", "10.244.2.7"))
        new_v4 = os.path.join(tmp, "new.restore")
        subprocess.run([kpc, "compile", new, "-o", new_v4], check=True)

        # (name, argv, exit code, words the report must contain)
        reports = [
            ("diff snapshots", ["diff", ex, new], 1, ["shop/web:http", "endpoint removed 10.244.2.6:8080"]),
            ("diff rule files", ["diff", v4, new_v4], 1, ["shop/web:http", "endpoint added 10.244.2.7:8080"]),
            ("diff equal", ["diff", v4, v4], 0, ["equivalent"]),
            ("diff across back ends", ["diff", ex, "--from-backend", "iptables", "--to-backend", "nftables",
                                       "--show-known"], 0, ["numgen-shares", "invalid-ct-drop", "source: kube-proxy"]),
            ("verify snapshots", ["verify", new, "--prior", ex], 0, ["verdict: identical"]),
            ("verify programs", ["verify", "--state", v4, "--partial", new_v4, "--full", v4], 1,
             ["verdict: not equivalent", "shop/web:http"]),
            ("drift", ["drift", new, "--state", v4], 1, ["shop/web:http", "jump rules missing"]),
            ("trace pod", ["trace", v4, "--src", "10.244.1.50", "--dst", "10.96.30.30", "--dport", "9000",
                           "--from", "pod"], 0, ["DNAT 10.244.1.30:9000", "service shop/cart"]),
            ("trace nodeport", ["trace", ex, "--src", "203.0.113.7", "--dst", "192.168.0.10", "--dport", "30080"], 0,
             ["DNAT 10.244.1.5:8080"]),
        ]
        verbose_words = 0
        for name, argv, rc, words in reports:
            r = subprocess.run([kpc] + argv, capture_output=True, text=True)
            where = "%s (kpc %s)" % (name, " ".join(argv))
            if r.returncode != rc:
                failures.append("%s: exit %d, expected %d: %s" % (where, r.returncode, rc, r.stderr[-500:]))
                continue
            for i, line in enumerate(r.stdout.splitlines(), 1):
                if columns(line) > WIDTH:
                    failures.append("%s: line %d has %d columns: %s" % (where, i, columns(line), line))
                m = INTERNAL.search(line)
                if m:
                    failures.append("%s: line %d says %r without --verbose: %s" % (where, i, m.group(0), line))
            for w in words:
                if w not in r.stdout:
                    failures.append("%s: the report lacks %r" % (where, w))
            v = subprocess.run([kpc] + argv + ["--verbose"], capture_output=True, text=True)
            if v.returncode != rc:
                failures.append("%s --verbose: exit %d, expected %d" % (where, v.returncode, rc))
            verbose_words += len(INTERNAL.findall(v.stdout))
            if name.startswith("trace") and max(map(columns, v.stdout.splitlines())) <= WIDTH:
                failures.append("%s --verbose: expected full-width rule lines" % where)
        if verbose_words == 0:
            failures.append("--verbose shows none of the internal words: the check above proves nothing")

        # Option values: counts and ports are checked, and the message names the option; a flag
        # that would be ignored (--verbose beside json or markdown) is an error too.
        bad_values = [
            ["validate", ex, "--max-input-size", "-1"],
            ["golden", ex, "--expect", tmp, "--diff-lines", "-1"],
            ["drift", ex, "--state", v4, "--max-atoms", "-1"],
            ["drift", ex, "--state", v4, "--max-atoms", "many"],
            ["trace", v4, "--src", "1.1.1.1", "--dst", "2.2.2.2", "--dport", "80", "--max-outcomes", "0"],
            ["trace", v4, "--src", "1.1.1.1", "--dst", "2.2.2.2", "--dport", "80", "--sport", "-5"],
            ["trace", v4, "--src", "1.1.1.1", "--dst", "2.2.2.2", "--dport", "65536"],
            ["trace", v4, "--src", "1.1.1.1", "--dst", "2.2.2.2", "--dport", "80", "--affinity-age", "-1"],
            # flags that would be ignored
            ["diff", v4, v4, "--format", "json", "--verbose"],
            ["drift", ex, "--state", v4, "--format", "markdown", "--verbose"],
            ["validate", ex, "--quiet", "--format", "json"],
        ]
        for argv in bad_values:
            r = subprocess.run([kpc] + argv, capture_output=True, text=True)
            option = [a for a in argv if a.startswith("--")][-1]
            if r.returncode != 2 or option not in r.stderr:
                failures.append("kpc %s: exit %d (expected 2, naming %s): %s" %
                                (" ".join(argv), r.returncode, option, r.stderr[:300]))
        applier = os.path.join(os.path.dirname(kpc), "kpc-applier")
        if os.path.exists(applier):
            r = subprocess.run([applier, "--watch", ex, "--debounce-ms", "-5", "--once"], capture_output=True, text=True)
            if r.returncode != 2 or "--debounce-ms" not in r.stderr:
                failures.append("kpc-applier --debounce-ms -5: exit %d: %s" % (r.returncode, r.stderr[:300]))
    for f in failures:
        print("FAIL", f)
    print("%d reports, %d bad option values, %d failures" % (len(reports), len(bad_values), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
