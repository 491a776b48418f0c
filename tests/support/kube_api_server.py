#!/usr/bin/env python3
"""A local HTTPS stand-in for the Kubernetes API server: the list/watch semantics that
kpc-applier's API client relies on, and the faults it must survive (no API server can be
installed on the test machines). Not a general API server: Services, EndpointSlices
(discovery.k8s.io/v1) and Nodes only, JSON only.

Serves (ServiceCIDRs too, networking.k8s.io/v1; --not-served PATH makes a path 404 as an
older server does), over TLS (--cert/--key; --client-ca makes a client certificate mandatory; --token
makes a bearer token mandatory, 401 otherwise):
  GET /api/v1/services, /apis/discovery.k8s.io/v1/endpointslices, /api/v1/nodes
    list:  ?limit=N&continue=T (pages), ?fieldSelector=metadata.name=X;
           metadata.resourceVersion = the current revision; items without kind/apiVersion
           (as the real server sends them).
    watch: ?watch=true&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=S
           a chunked stream of {"type","object"} lines, one per change after RV; ends cleanly
           after S seconds. RV older than the compacted revision: an ERROR event with code 410
           (or HTTP 410 with `compact` {"http": true}), as etcd compaction makes the real one do.

Driven through stdin, one JSON command a line, one JSON reply a line on stdout (the first
stdout line is "PORT <n>"). Commands work across network namespaces (pipes, not sockets):
  {"op":"put","object":{...}}                  create or replace; reply {"resourceVersion"}
  {"op":"delete","kind":K,"namespace":NS,"name":N}
  {"op":"load","files":[...]}                   make the object set that of these YAML files
                                                (puts for each object, deletes for the others)
  {"op":"keys"}                                 [[kind, namespace, name, resourceVersion], ...]
  {"op":"compact","http":false}                 every revision so far becomes too old (410)
  {"op":"drop"}                                 cut every open watch mid-stream (no final chunk)
  {"op":"bookmark"}                             a BOOKMARK to every watch that allows them
  {"op":"refuse","value":true}                  answer every request 503 until told otherwise
  {"op":"log"}                                  the requests so far [{path, query, status}]
  {"op":"quit"}
"""
import argparse
import json
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

RESOURCES = {
    "/api/v1/services": ("Service", "v1", "ServiceList"),
    "/apis/discovery.k8s.io/v1/endpointslices": ("EndpointSlice", "discovery.k8s.io/v1", "EndpointSliceList"),
    "/api/v1/nodes": ("Node", "v1", "NodeList"),
    "/apis/networking.k8s.io/v1/servicecidrs": ("ServiceCIDR", "networking.k8s.io/v1", "ServiceCIDRList"),
}
CLUSTER_SCOPED = ("Node", "ServiceCIDR")
KIND_PATH = {v[0]: k for k, v in RESOURCES.items()}


class Store:
    def __init__(self):
        self.cond = threading.Condition()
        self.rv = 1
        self.compacted = 0          # watches from an RV below this get 410
        self.gone_http = False
        self.objects = {}           # (kind, ns, name) -> object
        self.events = []            # (rv, kind, type, object, previous object or None)
        self.drop_gen = 0
        self.bookmark_gen = 0
        self.refuse = False
        self.log = []

    def key(self, obj):
        m = obj.get("metadata", {})
        return (obj["kind"], m.get("namespace", "") if obj["kind"] not in CLUSTER_SCOPED else "", m["name"])

    def put(self, obj):
        with self.cond:
            self.rv += 1
            obj = json.loads(json.dumps(obj))
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            k = self.key(obj)
            prev = self.objects.get(k)
            typ = "MODIFIED" if prev is not None else "ADDED"
            self.objects[k] = obj
            self.events.append((self.rv, obj["kind"], typ, obj, prev))
            self.cond.notify_all()
            return str(self.rv)

    def delete(self, kind, ns, name):
        with self.cond:
            k = (kind, ns if kind not in CLUSTER_SCOPED else "", name)
            obj = self.objects.pop(k, None)
            if obj is None:
                return None
            self.rv += 1
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append((self.rv, kind, "DELETED", obj, None))
            self.cond.notify_all()
            return str(self.rv)


STORE = Store()
ARGS = None


def objects_of(paths):
    """The Services, EndpointSlices and Nodes of YAML (or JSON) files, `kind: List` expanded."""
    out = []
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not isinstance(doc, dict):
                    continue
                for o in doc.get("items") or [] if doc.get("kind", "").endswith("List") else [doc]:
                    if isinstance(o, dict) and o.get("kind") in KIND_PATH:
                        out.append(o)
    return out


def load(paths):
    objs = objects_of(paths)
    keep = {STORE.key(o) for o in objs}
    for o in objs:
        STORE.put(o)
    with STORE.cond:
        gone = [k for k in STORE.objects if k not in keep]
    for k in gone:
        STORE.delete(*k)


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def selected(obj, q):
    """fieldSelector metadata.name=X; labelSelector terms `!key`, `key`, `key=value`."""
    fs = q.get("fieldSelector")
    if fs:
        f, _, v = fs.partition("=")
        if f != "metadata.name" or obj["metadata"]["name"] != v:
            return False
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (q.get("labelSelector") or "").split(",")):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "=" in term:
            k, _, v = term.partition("=")
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def as_seen(typ, obj, prev, q):
    """The event a watcher with selectors sees, or None: an object that starts or stops
    matching is ADDED or DELETED for it, as the real server does."""
    now = selected(obj, q)
    if typ != "MODIFIED":
        return typ if now else None
    before = selected(prev, q)
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        entry = {"path": url.path, "query": q, "status": 0}
        with STORE.cond:
            STORE.log.append(entry)
            refuse = STORE.refuse
        if refuse:
            entry["status"] = 503
            return self.send_json(503, status(503, "ServiceUnavailable", "the test server refuses requests"))
        if ARGS.token and self.headers.get("Authorization") != "Bearer " + ARGS.token:
            entry["status"] = 401
            return self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
        if url.path not in RESOURCES or url.path in ARGS.not_served:
            entry["status"] = 404
            return self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
        if q.get("watch") in ("true", "1"):
            return self.watch(url.path, q, entry)
        return self.list(url.path, q, entry)

    def list(self, path, q, entry):
        kind, api, list_kind = RESOURCES[path]
        with STORE.cond:
            rv = STORE.rv
            items = sorted((k, o) for k, o in STORE.objects.items() if k[0] == kind and selected(o, q))
            cont = q.get("continue", "")
            start = 0
            if cont:
                crv, _, off = cont.partition(":")
                if int(crv) < STORE.compacted:
                    entry["status"] = 410
                    return self.send_json(410, status(410, "Expired", "The provided continue parameter is too old"))
                rv, start = int(crv), int(off)  # a real server serves pages from the first page's snapshot; close enough here
        limit = int(q.get("limit", "0") or 0)
        page = items[start:start + limit] if limit > 0 else items[start:]
        meta = {"resourceVersion": str(rv)}
        if limit > 0 and start + limit < len(items):
            meta["continue"] = "%d:%d" % (rv, start + limit)
        out = []
        for _, o in page:
            o = dict(o)
            o.pop("kind", None)
            o.pop("apiVersion", None)
            out.append(o)
        entry["status"] = 200
        self.send_json(200, {"kind": list_kind, "apiVersion": api, "metadata": meta, "items": out})

    def chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, path, q, entry):
        kind, api, _ = RESOURCES[path]
        rv_text = q.get("resourceVersion", "")
        since = int(rv_text) if rv_text.isdigit() else 0
        timeout = float(q.get("timeoutSeconds", "1800") or 1800)
        bookmarks = q.get("allowWatchBookmarks") == "true"
        with STORE.cond:
            too_old = since != 0 and since < STORE.compacted
            gone_http = STORE.gone_http
            drop_gen, bookmark_gen = STORE.drop_gen, STORE.bookmark_gen
            if since == 0:
                since = STORE.rv
        if too_old and gone_http:
            entry["status"] = 410
            return self.send_json(410, status(410, "Expired", "too old resource version: %d" % since))
        entry["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        if too_old:
            self.chunk({"type": "ERROR", "object": status(410, "Expired", "too old resource version: %d (%d)" % (since, STORE.compacted))})
            self.wfile.write(b"0\r\n\r\n")
            return
        deadline = time.monotonic() + timeout
        sent = since
        while True:
            with STORE.cond:
                STORE.cond.wait_for(lambda: STORE.drop_gen != drop_gen or STORE.bookmark_gen != bookmark_gen or
                                    any(e[0] > sent and e[1] == kind for e in STORE.events[-200:]) or
                                    time.monotonic() >= deadline, timeout=0.2)
                if STORE.drop_gen != drop_gen:
                    # Cut the connection without the final chunk, as a dying server or a proxy does.
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                pending = [e for e in STORE.events if e[0] > sent and e[1] == kind]
                send_bookmark = bookmarks and STORE.bookmark_gen != bookmark_gen
                bookmark_gen = STORE.bookmark_gen
                current = STORE.rv
            try:
                for rv, _, typ, obj, prev in pending:
                    sent = rv
                    seen = as_seen(typ, obj, prev, q)
                    if seen:
                        self.chunk({"type": seen, "object": obj})
                if send_bookmark:
                    sent = max(sent, current)
                    self.chunk({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api,
                                                               "metadata": {"resourceVersion": str(current)}}})
                if time.monotonic() >= deadline:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
            except OSError:
                return


def control():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            c = json.loads(line)
            op = c["op"]
            reply = {"ok": True}
            if op == "put":
                reply["resourceVersion"] = STORE.put(c["object"])
            elif op == "delete":
                reply["resourceVersion"] = STORE.delete(c["kind"], c.get("namespace", ""), c["name"])
            elif op == "load":
                load(c["files"])
            elif op == "keys":
                with STORE.cond:
                    reply["keys"] = sorted([k[0], k[1], k[2], o["metadata"]["resourceVersion"]] for k, o in STORE.objects.items())
            elif op == "compact":
                with STORE.cond:
                    STORE.compacted = STORE.rv
                    STORE.gone_http = bool(c.get("http", False))
            elif op in ("drop", "bookmark"):
                with STORE.cond:
                    if op == "drop":
                        STORE.drop_gen += 1
                    else:
                        STORE.bookmark_gen += 1
                    STORE.cond.notify_all()
            elif op == "refuse":
                with STORE.cond:
                    STORE.refuse = bool(c.get("value", True))
            elif op == "log":
                with STORE.cond:
                    reply["log"] = list(STORE.log)
            elif op == "state":
                with STORE.cond:
                    reply["resourceVersion"] = str(STORE.rv)
                    reply["objects"] = len(STORE.objects)
            elif op == "quit":
                print(json.dumps(reply), flush=True)
                break
            else:
                reply = {"ok": False, "error": "unknown op " + op}
        except Exception as e:  # a bad command is the test's bug: say so, keep serving
            reply = {"ok": False, "error": repr(e)}
        print(json.dumps(reply), flush=True)
    import os
    os._exit(0)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--client-ca", default="")
    p.add_argument("--token", default="")
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--not-served", action="append", default=[], help="a resource path answered 404 (an older server)")
    p.add_argument("--objects", action="append", default=[], help="YAML files: their Services, EndpointSlices, Nodes")
    ARGS = p.parse_args()
    load(ARGS.objects)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    if ARGS.client_ca:
        ctx.load_verify_locations(ARGS.client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer((ARGS.bind, 0), Handler)
    server.daemon_threads = True
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    control()


if __name__ == "__main__":
    main()
