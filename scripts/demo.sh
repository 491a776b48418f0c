#!/usr/bin/env bash
# README command 1: install what is missing, build the release preset, and run
# kpc on the bundled example cluster (fixtures/example), showing each step.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

KPC=build/release/bin/kpc
EXAMPLE=fixtures/example
OUT=build/release/demo
mkdir -p "$OUT"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$KPC" --version
step "$KPC" validate --verbose "$EXAMPLE"
step "$KPC" compile "$EXAMPLE" --backend iptables -o "$OUT/iptables.restore" --stats
step "$KPC" compile "$EXAMPLE" --backend ip6tables -o "$OUT/ip6tables.restore" --stats
printf '\nFirst lines of %s:\n' "$OUT/iptables.restore"
head -n 25 "$OUT/iptables.restore"

printf '\nA change: shop/web gets a fourth endpoint. kube-proxy would now write a partial restore (KEP-3453):\n'
rm -rf "$OUT/next" && cp -r "$EXAMPLE" "$OUT/next"
sed -i 's/{"addresses": \["10.244.1.5"\]/{"addresses": ["10.244.1.9"], "conditions": {"ready": true}, "nodeName": "node-a"},\n        &/' \
  "$OUT/next/endpointslices.json"
step "$KPC" compile "$OUT/next" --backend iptables -o "$OUT/partial.restore" --stats --prior "$EXAMPLE"
grep -E '^(:KUBE-(SVC|SEP)|-X)' "$OUT/partial.restore" || true

printf '\nCheck it with the restore simulator: prior + partial must equal the full program for the change:\n'
step "$KPC" compile "$OUT/next" --backend iptables -o "$OUT/next-full.restore"
"$KPC" simulate --noflush "$OUT/iptables.restore" "$OUT/partial.restore" > "$OUT/prior+partial.save"
"$KPC" simulate --noflush "$OUT/next-full.restore" > "$OUT/full.save"
if diff -u "$OUT/full.save" "$OUT/prior+partial.save"; then echo "identical: prior + partial == full"; fi
step "$KPC" verify "$OUT/next" --prior "$EXAMPLE"

printf '\nTrace a packet from a pod to shop/cart (ClientIP affinity, three endpoints): exact probabilities:\n'
step "$KPC" trace "$OUT/iptables.restore" --src 10.244.1.50 --dst 10.96.30.30 --proto tcp --dport 9000 --from pod \
  | grep -E '^(\[|[0-9]+ outcomes)'

printf '\nA partial that forgot the new endpoint: kpc verify proves the difference with a witness packet:\n'
grep -v -- '-> 10.244.1.9:' "$OUT/partial.restore" > "$OUT/bad-partial.restore"
set +e
step "$KPC" verify --state "$OUT/iptables.restore" --partial "$OUT/bad-partial.restore" --full "$OUT/next-full.restore" \
  | head -n 12
set -e

printf '\nPre-upgrade diff: the same rules under other chain names are equivalent; the change is not:\n'
sed 's/KUBE-SEP-/KUBE-SEX-/g' "$OUT/iptables.restore" > "$OUT/renamed.restore"
step "$KPC" diff "$OUT/iptables.restore" "$OUT/renamed.restore"
set +e
step "$KPC" diff "$EXAMPLE" "$OUT/next" | head -n 16
echo "exit code: ${PIPESTATUS[0]}"
set -e

printf '\nDrift: the node lost a rule and has a stale chain; kpc writes the smallest repair:\n'
sed -e '0,/^-A KUBE-SVC-.*probability.*$/{/^-A KUBE-SVC-.*probability.*$/d}' \
    -e 's/^:KUBE-MARK-MASQ - \[0:0\]$/:KUBE-MARK-MASQ - [0:0]\n:KUBE-SEP-STALE0000000000 - [0:0]/' \
    "$OUT/full.save" > "$OUT/drifted.save"
step "$KPC" compile "$OUT/next" --prior-state "$OUT/drifted.save" --stats -o "$OUT/repair.restore"
cat "$OUT/repair.restore"

printf '\nkpc drift on a node dump: kube-proxy'"'"'s jumps and a Docker rule beside them, but the\n'
printf 'PREROUTING -> KUBE-SERVICES jump deleted. Only kube-proxy'"'"'s part counts; the report says which\n'
printf 'Services break and writes the repair (exit 1 = drift):\n'
cat > "$OUT/node-jumps.restore" <<'JUMPS'
*filter
-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-I INPUT 1 -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I FORWARD 1 -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I INPUT 1 -j KUBE-FIREWALL
-I OUTPUT 1 -j KUBE-FIREWALL
COMMIT
*nat
-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
COMMIT
JUMPS
"$KPC" simulate --noflush "$OUT/iptables.restore" "$OUT/node-jumps.restore" > "$OUT/node.save"
set +e
step "$KPC" drift "$EXAMPLE" --state "$OUT/node.save" -o "$OUT/drift-repair.restore" | head -n 14
echo "exit code: ${PIPESTATUS[0]}"
set -e
cat "$OUT/drift-repair.restore"
printf '\nnftables mode (issue 14): the transaction kube-proxy'"'"'s nftables proxier hands to nft -f, full and\n'
printf 'partial, loaded into the real nft in a throw-away network namespace when we are root:\n'
step "$KPC" compile "$EXAMPLE" --backend nftables -o "$OUT/nftables.nft" --stats
grep -E 'dnat to|numgen' "$OUT/nftables.nft" | head -n 4
step "$KPC" compile "$OUT/next" --backend nftables --prior "$EXAMPLE" -o "$OUT/nft-partial.nft" --stats
cat "$OUT/nft-partial.nft"
if [ "$(id -u)" = 0 ] && ip netns add kpc-demo 2>/dev/null; then
  ip netns exec kpc-demo nft -f "$OUT/nftables.nft" && ip netns exec kpc-demo nft -f "$OUT/nft-partial.nft" \
    && echo "the real nft accepted the full and the partial transaction"
  ip netns exec kpc-demo nft list chain ip kube-proxy services
  ip netns del kpc-demo
fi
printf '\nThe nft packet tracer (issue 16): a pod connecting to shop/web through the nftables program - numgen\n'
printf 'shares exactly 1/2 each, checked as a CI assertion:\n'
step "$KPC" trace "$OUT/nftables.nft" --src 10.244.1.50 --dst 10.96.10.10 --dport 80 --from pod \
  --expect-dnat 10.244.1.5:8080 --expect-dnat 10.244.2.6:8080 | grep -E '^\[|^packet'

printf '\nThe nft verifier (issue 16): prior + partial against the full transaction, by behaviour. Not identical\n'
printf '(kube-proxy deletes a flushed chain one sync later), but equivalent: no packet is treated differently:\n'
step "$KPC" compile "$OUT/next" --backend nftables -o "$OUT/nft-next-full.nft"
step "$KPC" verify --state "$OUT/nftables.nft" --partial "$OUT/nft-partial.nft" --full "$OUT/nft-next-full.nft" \
  --allow-equivalent | head -n 8

printf '\nkpc drift on an nftables node (its kube-proxy tables only): the node still runs the example,\n'
printf 'the snapshot moved on; the repair transaction comes with -o (exit 1 = drift). A pipe gives the same answer:\n'
"$KPC" simulate "$OUT/nftables.nft" > "$OUT/node.nft"
set +e
step "$KPC" drift "$OUT/next" --state "$OUT/node.nft" -o "$OUT/nft-repair.nft" | head -n 12
step "$KPC" diff "$OUT/nftables.nft" <("$KPC" compile "$OUT/next" --backend nftables) | head -n 6
set -e

printf '\nMoving this node from iptables to nftables mode: what changes, per Service, by behaviour; kube-proxy'"'"'s\n'
printf 'documented mode differences are named as such (exit 0 when nothing else differs):\n'
set +e
step "$KPC" diff "$EXAMPLE" --from-backend iptables --to-backend nftables --show-known > "$OUT/migration.txt"
rc=$?
set -e
head -n 24 "$OUT/migration.txt"
echo "... (all of it in $OUT/migration.txt); exit code: $rc"

printf '\nKEP-4963 fast path: Services with trafficHint: LongLived (shop/web here) offloaded to a flowtable:\n'
step "$KPC" compile "$EXAMPLE" --backend fastpath -o "$OUT/fastpath.nft"
cat "$OUT/fastpath.nft"

printf '\nIPVS mode (issue 17): virtual servers for ipvsadm -R, the KUBE-* ipsets, the companion iptables chains\n'
printf 'and the node plan (kube-ipvs0 addresses, sysctls for the node'"'"'s kernel, each with its reason):\n'
step "$KPC" compile "$EXAMPLE" --backend ipvs -o "$OUT/ipvs" --stats
head -n 4 "$OUT/ipvs/ipvs.rules"
grep -m1 conn_reuse_mode "$OUT/ipvs/node.plan"
printf '\nThe IPVS tracer (issue 17): a pod to shop/cart through the companion rules, IPVS and its scheduler:\n'
step "$KPC" trace "$OUT/ipvs" --src 10.244.1.50 --dst 10.96.30.30 --proto tcp --dport 9000 --from pod \
  | grep -E '^(\[|[0-9]+ outcomes|packet)' | head -n 8
if [ "$(id -u)" = 0 ] && ip netns add kpc-demo-ipvs 2>/dev/null; then
  # Without the ip_vs module the kernel refuses ipvs.rules and the `-m ipvs` rules of KUBE-IPVS-OUT-FILTER.
  ip netns exec kpc-demo-ipvs ipset restore < "$OUT/ipvs/ipset.rules" \
    && grep -v -- ' -m ipvs ' "$OUT/ipvs/iptables.rules" | ip netns exec kpc-demo-ipvs iptables-legacy-restore --noflush \
    && echo "the real ipset and iptables-restore accepted ipset.rules and iptables.rules (-m ipvs rules left out)"
  ip netns del kpc-demo-ipvs
fi

printf '\nkpc-applier (issue 15): one sync of the example onto a throw-away network namespace when we are root\n'
printf '(iptables legacy; every partial sync of a running applier is proven first: docs/applier.md):\n'
if [ "$(id -u)" = 0 ] && ip netns add kpc-demo-applier 2>/dev/null; then
  ip netns exec kpc-demo-applier "${KPC%/kpc}/kpc-applier" --watch "$EXAMPLE" --once --iptables legacy \
    --family ipv4 --state-dir "$OUT/applier-state" && echo "applied: exit code 0"
  ip netns exec kpc-demo-applier iptables-legacy-save -t nat | grep -c '^-A KUBE-' | sed 's/^/kube-proxy nat rules in the kernel: /'
  # nftables mode applied in-process (libnftables, no nft process): the same kernel result as `nft -f`.
  rm -rf "$OUT/example-nft" && cp -r "$EXAMPLE" "$OUT/example-nft" && rm -rf "$OUT/example-nft/expected"
  sed -i 's/^mode: .*/mode: nftables/' "$OUT/example-nft/kube-proxy.yaml"
  ip netns exec kpc-demo-applier "${KPC%/kpc}/kpc-applier" --watch "$OUT/example-nft" --once \
    --apply-with in-process --family ipv4 --state-dir "$OUT/applier-state-nft" >/dev/null 2>&1 \
    && ip netns exec kpc-demo-applier nft list chains ip | grep -c 'chain ' | sed 's/^/nftables chains applied in-process: /'
  ip netns exec kpc-demo-applier "${KPC%/kpc}/kpc-applier" --cleanup | tail -n 3
  ip netns del kpc-demo-applier
fi

printf '\nA bad input is refused with a located error and exit code 2:\n'
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  clusterIP: 10.0.0.1\n  ports:\n  - {name: a, port: 80}\n  - {name: b, port: 70000}\n' > "$OUT/bad.yaml"
set +e
"$KPC" validate "$OUT/bad.yaml"
echo "exit code: $?"
