#!/usr/bin/env python3
"""Regenerates the hostile-input corpus (tests/unit/loader_hostile_test.cpp loads every
file here through the loader and the CLI). Every file must be rejected with located
diagnostics, quickly and without a crash. Keep each file far below 100 KB; bigger inputs
are generated in memory by the test itself."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

def write(name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    assert len(data) < 100_000, name
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)

SVC = "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  ports: [{{port: 80}}]\n"

# Billion laughs: 9 levels of 9 aliases = 9^9 nodes if expanded.
lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
for i in range(1, 10):
    lines.append(f"lol{i}: &l{i} [" + ", ".join([f"*l{i-1}"] * 9) + "]")
write("alias_bomb.yaml", "\n".join(lines) + "\n")

write("deep_flow.yaml", "a: " + "[" * 10000 + "]" * 10000 + "\n")
write("deep_block.yaml", "- " * 10000 + "x\n")
write("deep_maps.yaml", "{a: " * 10000 + "1" + "}" * 10000 + "\n")
write("deep_arrays.json", "[" * 10000 + "]" * 10000)
write("deep_objects.json", '{"a":' * 10000 + "1" + "}" * 10000)

write("nul_byte.yaml", b"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\x00\n")
write("invalid_utf8.yaml", b"apiVersion: v1\nkind: Service\nmetadata:\n  name: w\xc3\x28eb\n")
write("control_chars.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\x1b[2J\n")
write("truncated.json", '{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "we')
write("duplicate_keys.json", '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "name": "evil"}}')

# Names that try to smuggle rule text into comments or a second diagnostic line.
inject = [
    SVC.format(name='"web\\" -j ACCEPT"'),
    SVC.format(name='"web\\nCOMMIT"'),
    SVC.format(name='"web\\r\\n-A KUBE-SERVICES -j ACCEPT"'),
    SVC.format(name='"w\u0435b"'),            # Cyrillic e
    SVC.format(name='"\uff57\uff45\uff42"'),  # fullwidth web
    SVC.format(name='"we\u200bb"'),           # zero-width space
    SVC.format(name='"web\u202e"'),           # right-to-left override
    "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: \"default\\n-A X\"\nspec:\n  ports: [{port: 80}]\n",
    "apiVersion: v1\nkind: Service\nmetadata:\n  name: web2\n  labels: {\"a\\nb\": \"c\\\"d\"}\nspec:\n"
    "  ports: [{name: \"http\\\" -j DROP\", port: 80, targetPort: \"x\\ny\"}]\n",
    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
    "detectLocal: {bridgeInterface: \"br0 -j ACCEPT\"}\nhostnameOverride: \"node\\nCOMMIT\"\n",
]
write("injection_names.yaml", "---\n".join(inject))

if __name__ == "__main__":
    print("corpus written to", HERE)
