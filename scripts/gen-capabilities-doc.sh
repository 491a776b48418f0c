#!/usr/bin/env bash
# Rewrites the generated part of docs/capabilities.md from the capability matrix in the code
# (compiler/driver/capabilities.cpp), as `kpc __capabilities` prints it.
# Usage: scripts/gen-capabilities-doc.sh [BUILD_DIR]   (default build/release)
# The test CapabilityMatrix.DocsHoldTheGeneratedTables fails when the two disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
doc=docs/capabilities.md
python3 - "$doc" "$build/bin/kpc" <<'PY'
import subprocess, sys
path = sys.argv[1]
tables = subprocess.run([sys.argv[2], "__capabilities"], check=True, capture_output=True, text=True).stdout
text = open(path, encoding="utf-8").read()
begin, end = "<!-- generated: kpc __capabilities -->\n", "<!-- end of generated part -->"
b, e = text.index(begin) + len(begin), text.index(end)
open(path, "w", encoding="utf-8").write(text[:b] + tables + text[e:])
PY
echo "gen-capabilities-doc: $doc rewritten"
