#!/usr/bin/env python3
"""Builds the fuzzers' seed corpora from fixtures/ (scripts/fuzz.sh runs this).

Usage: make_seeds.py ROOT OUTDIR

Writes OUTDIR/<target>/seed-*.{yaml,json,restore}; nothing here is committed (the
committed seeds are tests/fuzz/seeds/, kept small). Seeds of a target that already
exist are overwritten; files libFuzzer added to the corpus are left alone.

  load_yaml          one multi-document YAML file per fixture snapshot (every snapshot
                     file of the case, JSON ones turned into block YAML)
  load_json          the same snapshot as one JSON `kind: List`, and each JSON fixture file
  compile_apply      the YAML seeds, plus every pair of consecutive steps of multi-step
                     cases joined by the "#kpc-fuzz-next" line (a sync from a prior)
  restore_roundtrip  every expected restore program and kube-proxy expectation
                     (restore/save text), at most 64 KiB each
  restore            (the verifier's own target) the same restore seeds
"""
import hashlib
import json
import os
import sys

import yaml

MAX_SEED = 64 * 1024  # the targets reject larger inputs (see each target's comment)
SNAPSHOT_EXT = (".yaml", ".yml", ".json")
NEXT_MARKER = "\n#kpc-fuzz-next\n"


def snapshot_files(d):
    out = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if not os.path.isfile(p) or not name.endswith(SNAPSHOT_EXT):
            continue
        if name in ("case.yaml", ".case.yaml"):
            continue
        out.append(p)
    return out


def load_docs(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return [json.loads(text)]
    return [d for d in yaml.safe_load_all(text) if d is not None]


def as_yaml(paths):
    parts = []
    for p in paths:
        if p.endswith(".json"):
            for d in load_docs(p):
                parts.append(yaml.safe_dump(d, sort_keys=False, default_flow_style=False))
        else:
            with open(p, encoding="utf-8") as f:
                parts.append(f.read())
    return "---\n" + "---\n".join(s if s.endswith("\n") else s + "\n" for s in parts)


def as_json_list(paths):
    items = []
    for p in paths:
        items.extend(load_docs(p))
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1, default=str) + "\n"


def write(outdir, target, text, ext):
    data = text.encode("utf-8")
    if len(data) > MAX_SEED:
        return 0
    d = os.path.join(outdir, target)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16] + ext
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    return 1


def main():
    root, outdir = sys.argv[1], sys.argv[2]
    fixtures = os.path.join(root, "fixtures")
    counts = {}

    def add(target, text, ext):
        counts[target] = counts.get(target, 0) + write(outdir, target, text, ext)

    snapshot_dirs = []
    for dirpath, dirnames, _ in os.walk(fixtures):
        dirnames[:] = sorted(d for d in dirnames if d not in ("expected", "kubeproxy"))
        if dirpath != fixtures and snapshot_files(dirpath):
            snapshot_dirs.append(dirpath)
    for d in snapshot_dirs:
        files = snapshot_files(d)
        try:
            y = as_yaml(files)
            j = as_json_list(files)
        except (yaml.YAMLError, ValueError) as e:
            print(f"make_seeds: skipping {d}: {e}", file=sys.stderr)
            continue
        add("load_yaml", y, ".yaml")
        add("compile_apply", y, ".yaml")
        add("load_json", j, ".json")
        for p in files:
            if p.endswith(".json"):
                with open(p, encoding="utf-8") as f:
                    add("load_json", f.read(), ".json")
    # Consecutive steps of multi-step cases: a prior and the next snapshot.
    for dirpath, dirnames, _ in os.walk(fixtures):
        if os.path.basename(dirpath) != "steps":
            continue
        steps = sorted(os.path.join(dirpath, s) for s in dirnames)
        dirnames[:] = []
        for a, b in zip(steps, steps[1:]):
            fa, fb = snapshot_files(a), snapshot_files(b)
            if fa and fb:
                add("compile_apply", as_yaml(fa) + NEXT_MARKER.lstrip("\n") + as_yaml(fb), ".yaml")
    # Restore programs and save dumps.
    for dirpath, _, filenames in os.walk(fixtures):
        if os.path.basename(dirpath) not in ("expected", "kubeproxy"):
            continue
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            with open(p, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if "*nat" not in text and "*filter" not in text:
                continue
            add("restore_roundtrip", text, ".restore")
            add("restore", text, ".restore")
    for t in sorted(counts):
        print(f"make_seeds: {t}: {counts[t]} seeds")


if __name__ == "__main__":
    main()
