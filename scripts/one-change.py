#!/usr/bin/env python3
"""bench/one_change.h's change on a kpc-gen-cluster snapshot: EndpointSlice svc-42-abcde gains
a copy of its first endpoint at 10.200.0.1 (as a scale-up would).

Usage: scripts/one-change.py cluster.json cluster-next.json
"""
import copy
import json
import sys

src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    doc = json.load(f)
hits = 0
for item in doc["items"]:
    if item.get("kind") == "EndpointSlice" and item["metadata"]["name"] == "svc-42-abcde":
        ep = copy.deepcopy(item["endpoints"][0])
        ep["addresses"] = ["10.200.0.1"]
        item["endpoints"].append(ep)
        hits += 1
if hits != 1:
    sys.exit(f"{src}: {hits} EndpointSlices named svc-42-abcde (expected 1)")
with open(dst, "w") as f:
    json.dump(doc, f, indent=2, sort_keys=True)
    f.write("\n")
