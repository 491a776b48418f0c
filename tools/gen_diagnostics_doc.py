#!/usr/bin/env python3
"""Regenerates the code table in docs/diagnostics.md from compiler/support/diag_codes.def.

Usage: tools/gen_diagnostics_doc.py   (run from anywhere; rewrites the table in place)
The unit test DiagCatalogDoc.EveryCodeIsDocumented fails when the two disagree.
"""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
rows = []
for line in (root / "compiler/support/diag_codes.def").read_text().splitlines():
    m = re.match(r'KPC_DIAG\((\w+),\s*"(\w+)",\s*"([\w-]+)",\s*"(.*)"\)\s*$', line.strip())
    if m:
        _, code, name, meaning = m.groups()
        rows.append(f"| {code} | {name} | {meaning.replace(chr(92) + chr(34), chr(34))} |")

doc = root / "docs/diagnostics.md"
text = doc.read_text()
header = "| code | name | meaning |\n| --- | --- | --- |\n"
start = text.index(header) + len(header)
end = text.index("\n\n", start)
doc.write_text(text[:start] + "\n".join(rows) + text[end:])
