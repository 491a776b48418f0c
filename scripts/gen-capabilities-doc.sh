#!/usr/bin/env bash
# Rewrites the generated part of docs/capabilities.md from the capability matrix in the code
# (compiler/driver/capabilities.cpp), as `kpc __capabilities` prints it.
# Usage: scripts/gen-capabilities-doc.sh [BUILD_DIR]   (default build/release)
# The test CapabilityMatrix.DocsHoldTheGeneratedTables fails when the two disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
doc=docs/capabilities.md
tables=$("$build/bin/kpc" __capabilities)
python3 - "$doc" "$tables" <<'PY'
import sys
path, tables = sys.argv[1], sys.argv[2] + "\n"
text = open(path, encoding="utf-8").read()
begin, end = "<!-- generated: kpc __capabilities -->\n", "<!-- end of generated part -->"
b, e = text.index(begin) + len(begin), text.index(end)
open(path, "w", encoding="utf-8").write(text[:b] + tables + text[e:])
PY
echo "gen-capabilities-doc: $doc rewritten"
