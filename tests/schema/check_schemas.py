#!/usr/bin/python3
"""Agreement test between kpc's JSON Schemas (schemas/) and its C++ validator.

  check_schemas.py --kpc build/debug/bin/kpc --root .

1. Every schema in schemas/ must be a valid draft 2020-12 schema.
2. Every YAML/JSON document under fixtures/ (recursively; case.yaml files are
   fixture metadata and are skipped) whose kind kpc reads must validate against
   its schema.
3. Every corpus file under tests/schema/corpus/{good,bad}/ is judged by both
   sides: the schemas (each document dispatched by kind) and `kpc validate FILE`
   (exit 0 = valid, 2 = invalid). Good files must be accepted by both; bad files
   (first line `# expect: E0300`) rejected by both, with the expected code in
   kpc's stderr. Disagreements are printed as a table and make the exit code 1.

Documents are read the way kpc reads them (see docs/schemas.md):
plain YAML scalars are typed as go-yaml v2 / kpc type them (y/n/yes/on are
booleans, 0755 is a string, timestamps are strings), mapping keys are their text,
and `<<` is not interpreted (kpc applies merge keys; the corpus uses none). Needs only python3-jsonschema and python3-yaml.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

import jsonschema
import yaml

# Corpus files on which kpc is known to disagree with the API server (and so with
# the schemas, which follow the API server there). Keep this short: each entry is
# a C++ validator bug to fix; a fixed entry makes this test fail until removed.
KNOWN_DISAGREEMENTS = {
    # Empty: the seven C++ validator bugs this test found were fixed (segfault on an empty
    # clusterIPs list, externalName trailing dot / upper case, Service without spec,
    # link-local external IPs and endpoint addresses, ServiceCIDR without cidrs).
}

OUR_KINDS = {
    "Service": "service.schema.json",
    "EndpointSlice": "endpointslice.schema.json",
    "Node": "node.schema.json",
    "ServiceCIDR": "servicecidr.schema.json",
    "KubeProxyConfiguration": "kubeproxyconfiguration.schema.json",
    "NodeEnvironment": "nodeenvironment.schema.json",
}
LIST_SCHEMA = "list.schema.json"
EXPECT_RE = re.compile(r"^#\s*expect:\s*([EW][0-9]{4})\s*$")
CODE_RE = re.compile(r"error\[(E[0-9]{4})\]")


# ---------------------------------------------------------------- reading documents like kpc
class KpcLoader(yaml.SafeLoader):
    """YAML 1.1 plain-scalar typing as kpc's reader (compiler/model/doc_yaml.cpp) does it."""


KpcLoader.yaml_implicit_resolvers = {}
_NULL_TAG = "tag:yaml.org,2002:null"
_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}
for _tag, _regex, _first in [
    ("tag:yaml.org,2002:bool",
     r"^(?:true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N)$", "tTfFyYnNoO"),
    ("tag:yaml.org,2002:int", r"^[-+]?(?:0|[1-9][0-9]*)$", "-+0123456789"),
    ("tag:yaml.org,2002:float", r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)$", "-+.0123456789"),
    (_NULL_TAG, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
]:
    KpcLoader.add_implicit_resolver(_tag, re.compile(_regex), list(_first))


def _construct_bool(loader, node):
    return loader.construct_scalar(node) in _TRUE


def _construct_mapping(loader, node, deep=False):
    # Keys are their text (kpc has no non-string keys); '<<' is not a merge key; duplicates are errors.
    mapping = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise yaml.constructor.ConstructorError(None, None, "mapping keys must be scalars", key_node.start_mark)
        key = "" if key_node.tag == _NULL_TAG else key_node.value
        if key in mapping:
            raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % key, key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


KpcLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
KpcLoader.construct_mapping = _construct_mapping


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key %r" % k)
        out[k] = v
    return out


def read_documents(path):
    """All documents of a file (empty YAML documents dropped, as kpc does)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return [json.loads(text, object_pairs_hook=_no_duplicates)]
    return [d for d in yaml.load_all(text, Loader=KpcLoader) if d is not None]


def schema_for(doc):
    """The schema file a document is checked against, or None (kpc skips or rejects it outright)."""
    if not isinstance(doc, dict):
        return None
    kind = doc.get("kind")
    if not isinstance(kind, str):
        return None
    if kind == "List" or (len(kind) > 4 and kind.endswith("List") and "items" in doc):
        return LIST_SCHEMA
    return OUR_KINDS.get(kind)


# ---------------------------------------------------------------- schemas
def _patterns(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                yield v
            else:
                yield from _patterns(v)
    elif isinstance(node, list):
        for v in node:
            yield from _patterns(v)


def load_schemas(schema_dir):
    """{file name: validator}; raises on an invalid schema."""
    schemas = {}
    for name in sorted(os.listdir(schema_dir)):
        if name.endswith(".schema.json"):
            with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
                schemas[name] = json.load(f)
    problems = []
    for name, s in schemas.items():
        try:
            jsonschema.Draft202012Validator.check_schema(s)
        except jsonschema.exceptions.SchemaError as e:
            problems.append("%s: %s" % (name, e.message))
        if s.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            problems.append("%s: $schema must be draft 2020-12" % name)
        if not str(s.get("$id", "")).endswith("/" + name):
            problems.append("%s: $id must end in /%s" % (name, name))
        for p in _patterns(s):
            if re.search(r"\\[dDsSwWzZA]", p):
                problems.append("%s: pattern %r uses a class that differs between ECMA-262 and Python" % (name, p))
            try:
                re.compile(p)
            except re.error as e:
                problems.append("%s: pattern %r: %s" % (name, p, e))
    if problems:
        raise SystemExit("invalid schemas:\n  " + "\n  ".join(problems))
    for name in list(OUR_KINDS.values()) + [LIST_SCHEMA]:
        if name not in schemas:
            raise SystemExit("missing schema %s" % name)
    return {name: _validator(s, schemas) for name, s in schemas.items()}


def _validator(schema, schemas):
    try:  # jsonschema >= 4.18
        import referencing
        import referencing.jsonschema
        registry = referencing.Registry().with_resources(
            (s["$id"], referencing.Resource.from_contents(s, default_specification=referencing.jsonschema.DRAFT202012))
            for s in schemas.values())
        return jsonschema.Draft202012Validator(schema, registry=registry)
    except ImportError:  # Debian's 4.10: RefResolver with a store keyed by $id
        store = {s["$id"]: s for s in schemas.values()}
        resolver = jsonschema.RefResolver.from_schema(schema, store=store)
        return jsonschema.Draft202012Validator(schema, resolver=resolver)


def schema_errors(validators, docs):
    """(checked documents, [error text]) for the documents of one file."""
    checked, errors = 0, []
    for i, doc in enumerate(docs):
        name = schema_for(doc)
        if name is None:
            continue
        checked += 1
        errs = sorted(validators[name].iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errs:
            best = jsonschema.exceptions.best_match(errs)
            where = "/".join(str(p) for p in best.absolute_path) or "(document)"
            errors.append("doc %d (%s) %s: %s" % (i + 1, name, where, best.message[:160]))
    return checked, errors


# ---------------------------------------------------------------- kpc
def run_kpc(kpc, path):
    """(verdict, error codes, stderr): verdict is 'accept', 'reject' or 'error (exit N)'."""
    try:
        p = subprocess.run([kpc, "validate", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30, env=dict(os.environ, NO_COLOR="1"))
    except subprocess.TimeoutExpired:
        return "error (timeout)", [], ""
    stderr = p.stderr.decode("utf-8", "replace")
    verdict = {0: "accept", 2: "reject"}.get(p.returncode, "error (exit %d)" % p.returncode)
    return verdict, sorted(set(CODE_RE.findall(stderr))), stderr


def check_corpus(root, kpc, validators, verbose):
    corpus = os.path.join(root, "tests", "schema", "corpus")
    cases = []
    for group in ("good", "bad"):
        d = os.path.join(corpus, group)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".yaml", ".yml", ".json")):
                cases.append((group, name, os.path.join(d, name)))

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        kpc_results = list(pool.map(lambda c: run_kpc(kpc, c[2]), cases))

    rows, known, stale, lint = [], [], [], []
    for (group, name, path), (verdict, codes, stderr) in zip(cases, kpc_results):
        rel = group + "/" + name
        with open(path, encoding="utf-8") as f:
            first = f.readline().rstrip("\n")
        m = EXPECT_RE.match(first)
        expect = m.group(1) if m else None
        problems = []
        if group == "bad" and not expect:
            problems.append("first line must be '# expect: E....'")
        if group == "good" and expect:
            problems.append("good files take no '# expect:' line")
        try:
            checked, errs = schema_errors(validators, read_documents(path))
            schema_verdict = "reject" if errs else "accept"
            if checked == 0:
                problems.append("no document of a kind kpc reads")
        except (yaml.YAMLError, ValueError) as e:
            errs, schema_verdict = ["not readable: %s" % str(e).splitlines()[0]], "reject"
        want = "accept" if group == "good" else "reject"
        if schema_verdict != want:
            problems.append("schema: %s (want %s)%s" % (schema_verdict, want, ": " + errs[0] if errs else ""))
        kpc_problem = None
        if verdict != want:
            kpc_problem = "kpc: %s (want %s)%s" % (verdict, want, " " + ",".join(codes) if codes else "")
        elif group == "bad" and expect and expect not in codes:
            kpc_problem = "kpc: rejects with %s, not %s" % (",".join(codes) or "no code", expect)
        if group == "bad" and verdict == "reject" and expect and set(codes) - {expect}:
            lint.append("%s: kpc also reports %s (a bad case should break exactly one rule)"
                        % (rel, ",".join(sorted(set(codes) - {expect}))))
        if rel in KNOWN_DISAGREEMENTS:
            if kpc_problem:
                known.append((rel, kpc_problem, KNOWN_DISAGREEMENTS[rel]))
            else:
                stale.append(rel)
        elif kpc_problem:
            problems.append(kpc_problem)
        if problems:
            rows.append((rel, "; ".join(problems)))
        if verbose:
            print("  %-58s schema=%-6s kpc=%-6s %s%s" % (rel, schema_verdict, verdict, ",".join(codes),
                                                          ("  [" + errs[0] + "]") if errs else ""))
    for rel in KNOWN_DISAGREEMENTS:
        if rel not in {g + "/" + n for g, n, _ in cases}:
            rows.append((rel, "listed in KNOWN_DISAGREEMENTS but the corpus file does not exist"))
    for rel in stale:
        rows.append((rel, "listed in KNOWN_DISAGREEMENTS but kpc now agrees: remove the entry"))
    good = sum(1 for c in cases if c[0] == "good")
    failed_cases = len({r for r, _ in rows} & {g + "/" + n for g, n, _ in cases})
    return rows, known, lint, good, len(cases) - good, failed_cases


def check_fixtures(root, validators):
    failures, files, docs = [], 0, 0
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "fixtures")):
        dirnames.sort()
        for name in sorted(filenames):
            if name == "case.yaml" or not name.endswith((".yaml", ".yml", ".json")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            try:
                checked, errs = schema_errors(validators, read_documents(path))
            except (yaml.YAMLError, ValueError) as e:
                failures.append((rel, "not readable: %s" % str(e).splitlines()[0]))
                continue
            if checked:
                files += 1
                docs += checked
            failures.extend((rel, e) for e in errs)
    return failures, files, docs


def table(rows, headers):
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    widths[-1] = 0
    line = lambda r: "  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * len(h) for h in headers])] + [line(r) for r in rows])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kpc", required=True, help="path to the kpc binary")
    ap.add_argument("--root", required=True, help="repository root")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every corpus verdict and lint notes")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    kpc = os.path.abspath(args.kpc)
    if not os.access(kpc, os.X_OK):
        sys.exit("kpc binary not found or not executable: %s" % kpc)

    validators = load_schemas(os.path.join(root, "schemas"))
    print("schemas: %d valid draft 2020-12 schemas" % len(validators))

    fx_failures, fx_files, fx_docs = check_fixtures(root, validators)
    print("fixtures: %d documents in %d files checked, %d failed" % (fx_docs, fx_files, len(fx_failures)))
    if fx_failures:
        print(table(fx_failures, ["fixture", "schema error"]))

    rows, known, lint, good, bad, failed_cases = check_corpus(root, kpc, validators, args.verbose)
    print("corpus: %d good + %d bad files, %d agree, %d known disagreements, %d problems"
          % (good, bad, good + bad - len(known) - failed_cases, len(known), len(rows)))
    if known:
        print("known disagreements (C++ validator bugs, see KNOWN_DISAGREEMENTS):")
        print(table([(r, p) for r, p, _ in known], ["corpus file", "kpc"]))
    if rows:
        print("DISAGREEMENTS:")
        print(table(rows, ["corpus file", "problem"]))
    if args.verbose and lint:
        print("notes:\n  " + "\n  ".join(lint))
    fx_failed_files = len({f for f, _ in fx_failures})
    print("%d passed, %d failed" % (fx_files - fx_failed_files + good + bad - failed_cases,
                                     fx_failed_files + len(rows)))
    return 1 if fx_failures or rows else 0


if __name__ == "__main__":
    sys.exit(main())
