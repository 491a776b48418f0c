// Adversarial snapshots against the kpc binary (issue 6): names, port names, labels
// and config strings that try to inject rule text (quotes, newlines, `-j`, `COMMIT`),
// Unicode look-alikes, integers at and past every bound, duplicate and conflicting
// objects, dual-stack mismatches. Each rejected case must make both `kpc validate F`
// and `kpc compile F -o OUT` exit 2 within 5 s and 512 MiB, with a located (F:LINE:COL) error of the
// expected code, and leave OUT unwritten. Values at a bound must be accepted, and text
// kpc ignores (annotations, kinds it does not read) must not change a single byte of
// the output.
//
// The loader-level checks of the same shapes (diagnostic code, path, position) are in
// loader_diag_codes_test.cpp, loader_hostile_test.cpp and loader_yaml_typing_test.cpp;
// this file is the end-to-end contract of the CLI. Every case is a complete, compilable
// snapshot (config + host + Node + Service + EndpointSlice) with one thing wrong, so an
// exit 2 can only come from that one thing.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

const std::string kConfig = R"(apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: node-a
clusterCIDR: 10.0.0.0/8,fd00::/48
)";
const std::string kEnv = R"(apiVersion: kpc.dev/v1alpha1
kind: NodeEnvironment
interfaces:
- {name: lo, addresses: ["127.0.0.1/8", "::1/128"]}
- {name: eth0, addresses: ["192.168.0.10/24", "2001:db8::10/64"]}
)";
const std::string kNode = R"(apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  addresses:
  - {type: InternalIP, address: 192.168.0.10}
  - {type: InternalIP, address: "2001:db8::10"}
)";
const std::string kPorts = "[{name: http, port: 80, targetPort: 8080, nodePort: 30080}]";

std::string dual_spec(const std::string& ports) {
  return "  type: NodePort\n  clusterIPs: [10.96.0.10, \"fd00:96::10\"]\n  ipFamilies: [IPv4, IPv6]\n"
         "  ipFamilyPolicy: RequireDualStack\n  ports: " + ports + "\n";
}
std::string svc(const std::string& meta = "{name: web, namespace: default}", const std::string& spec = dual_spec(kPorts)) {
  return "apiVersion: v1\nkind: Service\nmetadata: " + meta + "\nspec:\n" + spec;
}
std::string svc_ports(const std::string& ports) { return svc("{name: web, namespace: default}", dual_spec(ports)); }
/// A second, IPv4-only Service (cluster IP 10.96.0.99) with extra spec lines.
std::string svc2(const std::string& name, const std::string& extra, const std::string& ports = "[{name: http, port: 80}]") {
  return svc("{name: " + name + ", namespace: default}", "  clusterIP: 10.96.0.99\n  ports: " + ports + "\n" + extra);
}
const std::string kSliceMeta = "{name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}";
const std::string kSliceBody =
    "addressType: IPv4\nendpoints: [{addresses: [10.1.0.5], nodeName: node-a, conditions: {ready: true}}]\n"
    "ports: [{name: http, port: 8080, protocol: TCP}]\n";
std::string slice(const std::string& body = kSliceBody, const std::string& meta = kSliceMeta) {
  return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: " + meta + "\n" + body;
}
std::string eps_body(const std::string& endpoint, const std::string& ports = "[{name: http, port: 8080}]",
                     const std::string& type = "IPv4") {
  return "addressType: " + type + "\nendpoints: [" + endpoint + "]\nports: " + ports + "\n";
}

struct Parts {
  std::string config = kConfig, env = kEnv, node = kNode, service = svc(), slice = ::kpc::test::slice();
  std::vector<std::string> extra;
  std::string text() const {
    std::string t = config + "---\n" + env + "---\n" + node + "---\n" + service + "---\n" + slice;
    for (const auto& e : extra) t += "---\n" + e;
    return t;
  }
};
std::string with_service(std::string s) { Parts p; p.service = std::move(s); return p.text(); }
std::string with_slice(std::string s) { Parts p; p.slice = std::move(s); return p.text(); }
std::string with_config(std::string s) { Parts p; p.config = std::move(s); return p.text(); }
std::string with_env(std::string s) { Parts p; p.env = std::move(s); return p.text(); }
std::string with_node(std::string s) { Parts p; p.node = std::move(s); return p.text(); }
std::string plus(std::string doc) { Parts p; p.extra.push_back(std::move(doc)); return p.text(); }
std::string replaced(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  if (at == std::string::npos) throw std::logic_error("replaced: \"" + from + "\" not found");
  return s.replace(at, from.size(), to);
}

struct Case {
  std::string group, what, text, code;
};

std::vector<Case> rejected_cases() {
  std::vector<Case> c = {
      // ------------------------------------------------ rule text through names and strings
      {"inject", "Service name with quote and -j", with_service(svc("{name: \"web\\\" -j ACCEPT\", namespace: default}")), "E0200"},
      {"inject", "Service name with newline COMMIT", with_service(svc("{name: \"web\\nCOMMIT\\n*filter\", namespace: default}")), "E0200"},
      {"inject", "Service name with CR and a rule", with_service(svc("{name: \"web\\r-A KUBE-SERVICES -j ACCEPT\", namespace: default}")), "E0200"},
      {"inject", "Service named -j", with_service(svc("{name: \"-j\", namespace: default}")), "E0200"},
      {"inject", "Service named COMMIT", with_service(svc("{name: COMMIT, namespace: default}")), "E0200"},
      {"inject", "namespace with -j", with_service(svc("{name: web, namespace: \"default -j ACCEPT\"}")), "E0200"},
      {"inject", "port name with quotes", with_service(svc_ports("[{name: \"http\\\" -j DROP \\\"\", port: 80, nodePort: 30080}]")), "E0204"},
      {"inject", "port name with newline", with_service(svc_ports("[{name: \"http\\nCOMMIT\", port: 80, nodePort: 30080}]")), "E0204"},
      {"inject", "targetPort name -j ACCEPT", with_service(svc_ports("[{name: http, port: 80, targetPort: \"-j ACCEPT\"}]")), "E0204"},
      {"inject", "protocol with -j", with_service(svc_ports("[{name: http, port: 80, protocol: \"TCP -j ACCEPT\"}]")), "E0301"},
      {"inject", "label key with newline", with_service(svc("{name: web, namespace: default, labels: {\"a\\nCOMMIT\": b}}")), "E0201"},
      {"inject", "label value with -j", with_service(svc("{name: web, namespace: default, labels: {a: \"b -j ACCEPT\"}}")), "E0201"},
      {"inject", "service-name label with quote",
       with_slice(slice(kSliceBody, "{name: web-1, namespace: default, labels: {kubernetes.io/service-name: \"web\\\" -j ACCEPT\"}}")), "E0201"},
      {"inject", "slice port name COMMIT", with_slice(slice(eps_body("{addresses: [10.1.0.5]}", "[{name: \"http\\nCOMMIT\", port: 8080}]"))), "E0204"},
      {"inject", "endpoint nodeName with -j", with_slice(slice(eps_body("{addresses: [10.1.0.5], nodeName: \"node-a -j ACCEPT\"}"))), "E0200"},
      {"inject", "endpoint zone with quote", with_slice(slice(eps_body("{addresses: [10.1.0.5], zone: \"z\\\"\"}"))), "E0201"},
      {"inject", "Node name with a rule", with_node("apiVersion: v1\nkind: Node\nmetadata: {name: \"node-a\\n-A X -j ACCEPT\"}\n"), "E0200"},
      {"inject", "hostnameOverride COMMIT", with_config(replaced(kConfig, "hostnameOverride: node-a", "hostnameOverride: \"node-a\\nCOMMIT\"")), "E0200"},
      {"inject", "bridgeInterface with -j",
       with_config(kConfig + "detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: \"br0 -j ACCEPT\"}\n"), "E0500"},
      {"inject", "interfaceNamePrefix with quote",
       with_config(kConfig + "detectLocalMode: InterfaceNamePrefix\ndetectLocal: {interfaceNamePrefix: \"veth\\\"\"}\n"), "E0500"},
      {"inject", "NodeEnvironment interface name with -j", with_env(replaced(kEnv, "name: eth0", "name: \"eth0 -j ACCEPT\"")), "E0500"},
      {"inject", "NodeEnvironment hostname COMMIT", with_env(kEnv + "hostname: \"h\\nCOMMIT\"\n"), "E0200"},
      {"inject", "externalName with newline",
       plus(svc("{name: ext, namespace: default}", "  type: ExternalName\n  externalName: \"a.example.com\\nCOMMIT\"\n")), "E0200"},
      {"inject", "loadBalancerSourceRanges with -j",
       plus(svc2("lb", "  type: LoadBalancer\n  loadBalancerSourceRanges: [\"10.0.0.0/8 -j ACCEPT\"]\n")), "E0203"},
      {"inject", "externalIPs with a rule", plus(svc2("ex", "  externalIPs: [\"1.2.3.4\\n-A X\"]\n")), "E0202"},
      {"inject", "nodePortAddresses with -j", with_config(kConfig + "nodePortAddresses: [\"0.0.0.0/0 -j ACCEPT\"]\n"), "E0203"},
      {"inject", "raw escape byte in a name", with_service(svc("{name: \"web\x1b[2J\", namespace: default}")), "E0003"},
      // nft syntax (issue 14): statement separators, blocks and comments through every name
      {"inject-nft", "Service name with ; and a command", with_service(svc("{name: \"web;flush ruleset\", namespace: default}")), "E0200"},
      {"inject-nft", "namespace with braces", with_service(svc("{name: web, namespace: \"a{b}\"}")), "E0200"},
      {"inject-nft", "port name with ; and #", with_service(svc_ports("[{name: \"h;#x\", port: 80, nodePort: 30080}]")), "E0204"},
      {"inject-nft", "slice port name with a brace", with_slice(slice(eps_body("{addresses: [10.1.0.5]}", "[{name: \"http}\", port: 8080}]"))), "E0204"},
      {"inject-nft", "trafficHint with a command", with_service(svc("{name: web, namespace: default}", dual_spec(kPorts) + "  trafficHint: \"LongLived; flush ruleset\"\n")), "E0302"},
      // ------------------------------------------------ Unicode look-alikes
      {"unicode", "Cyrillic e in a Service name", with_service(svc("{name: \"w\u0435b\", namespace: default}")), "E0200"},
      {"unicode", "fullwidth Service name", with_service(svc("{name: \"\uff57\uff45\uff42\", namespace: default}")), "E0200"},
      {"unicode", "zero-width space in a name", with_service(svc("{name: \"we\u200bb\", namespace: default}")), "E0200"},
      {"unicode", "right-to-left override in a name", with_service(svc("{name: \"web\u202e\", namespace: default}")), "E0200"},
      {"unicode", "Cyrillic namespace", with_service(svc("{name: web, namespace: \"d\u0435fault\"}")), "E0200"},
      {"unicode", "fullwidth digits as a port", with_service(svc_ports("[{name: http, port: \"\uff18\uff10\"}]")), "E0100"},
      {"unicode", "Arabic-Indic digits as a port", with_service(svc_ports("[{name: http, port: \u0668\u0660}]")), "E0100"},
      {"unicode", "Cyrillic TCP", with_service(svc_ports("[{name: http, port: 80, protocol: \"\u0422\u0421P\"}]")), "E0301"},
      {"unicode", "fullwidth digits in a cluster IP",
       plus(svc("{name: u, namespace: default}", "  clusterIP: \"\uff11\uff10.96.0.30\"\n  ports: [{port: 80}]\n")), "E0202"},
      {"unicode", "NEL in a port name", with_service(svc_ports("[{name: \"ht\u0085tp\", port: 80}]")), "E0204"},
      {"unicode", "no-break space in a label value", with_service(svc("{name: web, namespace: default, labels: {a: \"b\u00a0c\"}}")), "E0201"},
      {"unicode", "Cyrillic o in a nodeName", with_slice(slice(eps_body("{addresses: [10.1.0.5], nodeName: \"n\u043ede-a\"}"))), "E0200"},
      {"unicode", "fullwidth I in addressType", with_slice(slice(eps_body("{addresses: [10.1.0.5]}", "[]", "\uff29Pv4"))), "E0302"},
      {"unicode", "Cyrillic ClientIP", plus(svc2("aff", "  sessionAffinity: \"Cl\u0456entIP\"\n")), "E0302"},
      // ------------------------------------------------ integers past their bounds
      {"bounds", "healthCheckNodePort 65536",
       plus(svc2("lb", "  type: LoadBalancer\n  externalTrafficPolicy: Local\n  healthCheckNodePort: 65536\n",
                 "[{port: 80, nodePort: 30081}]")), "E0300"},
      {"bounds", "affinity timeout 0",
       plus(svc2("aff", "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}\n")), "E0306"},
      {"bounds", "affinity timeout 86401",
       plus(svc2("aff", "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 86401}}\n")), "E0306"},
      {"bounds", "masqueradeBit 32", with_config(kConfig + "iptables: {masqueradeBit: 32}\n"), "E0500"},
      {"bounds", "masqueradeBit -1", with_config(kConfig + "iptables: {masqueradeBit: -1}\n"), "E0500"},
      {"bounds", "oomScoreAdj 1001", with_config(kConfig + "oomScoreAdj: 1001\n"), "E0500"},
      {"bounds", "conntrack.min -1", with_config(kConfig + "conntrack: {min: -1}\n"), "E0500"},
      {"bounds", "syncPeriod past int64 ns", with_config(kConfig + "iptables: {syncPeriod: 2562048h}\n"), "E0501"},
      {"bounds", "EndpointSlice port 65536", with_slice(slice(eps_body("{addresses: [10.1.0.5]}", "[{name: http, port: 65536}]"))), "E0300"},
      {"bounds", "EndpointSlice port 0", with_slice(slice(eps_body("{addresses: [10.1.0.5]}", "[{name: http, port: 0}]"))), "E0300"},
      {"bounds", "Service name of 64 characters", with_service(svc("{name: " + std::string(64, 'a') + ", namespace: default}")), "E0200"},
      {"bounds", "port name of 64 characters", with_service(svc_ports("[{name: " + std::string(64, 'a') + ", port: 80}]")), "E0204"},
      {"bounds", "IPv4 octet 256", plus(svc("{name: u, namespace: default}", "  clusterIP: 10.96.0.256\n  ports: [{port: 80}]\n")), "E0202"},
      {"bounds", "IPv4 prefix /33", with_config(replaced(kConfig, "10.0.0.0/8", "10.0.0.0/33")), "E0203"},
      {"bounds", "IPv6 prefix /129", with_config(replaced(kConfig, "fd00::/48", "fd00::/129")), "E0203"},
      // ------------------------------------------------ duplicates and conflicts
      {"conflict", "the same Service twice", plus(svc()), "E0600"},
      {"conflict", "the same EndpointSlice twice", plus(slice()), "E0600"},
      {"conflict", "the same Node twice", plus(kNode), "E0600"},
      {"conflict", "two KubeProxyConfigurations", plus(kConfig), "E0601"},
      {"conflict", "two NodeEnvironments", plus(kEnv), "E0601"},
      {"conflict", "a cluster IP claimed twice",
       plus(svc("{name: api, namespace: default}", "  clusterIP: 10.96.0.10\n  ports: [{port: 80}]\n")), "E0602"},
      {"conflict", "a nodePort claimed twice",
       plus(svc2("api", "  type: NodePort\n", "[{port: 80, nodePort: 30080}]")), "E0603"},
      {"conflict", "a duplicate mapping key", with_service(svc("{name: web, name: evil, namespace: default}")), "E0014"},
      {"conflict", "a duplicate port", with_service(svc_ports("[{name: a, port: 80}, {name: b, port: 80}]")), "E0303"},
      {"conflict", "a duplicate port name", with_service(svc_ports("[{name: a, port: 80}, {name: a, port: 81}]")), "E0303"},
      {"conflict", "clusterIP and clusterIPs disagree",
       plus(svc("{name: api, namespace: default}", "  clusterIP: 10.96.0.40\n  clusterIPs: [10.96.0.41]\n  ports: [{port: 80}]\n")), "E0305"},
      // ------------------------------------------------ dual-stack mismatches
      {"dualstack", "two IPv4 cluster IPs",
       plus(svc("{name: ds, namespace: default}", "  clusterIPs: [10.96.0.50, 10.96.0.51]\n  ipFamilyPolicy: RequireDualStack\n  ports: [{port: 80}]\n")), "E0305"},
      {"dualstack", "ipFamilies in the other order than clusterIPs",
       plus(svc("{name: ds, namespace: default}", "  clusterIPs: [10.96.0.50, \"fd00:96::50\"]\n  ipFamilies: [IPv6, IPv4]\n"
                "  ipFamilyPolicy: RequireDualStack\n  ports: [{port: 80}]\n")), "E0305"},
      {"dualstack", "SingleStack with two cluster IPs",
       plus(svc("{name: ds, namespace: default}", "  clusterIPs: [10.96.0.50, \"fd00:96::50\"]\n  ipFamilyPolicy: SingleStack\n  ports: [{port: 80}]\n")), "E0305"},
      {"dualstack", "three ipFamilies",
       plus(svc("{name: ds, namespace: default}", "  clusterIPs: [10.96.0.50]\n  ipFamilies: [IPv4, IPv6, IPv4]\n  ports: [{port: 80}]\n")), "E0103"},
      {"dualstack", "IPv4 family with an IPv6 cluster IP",
       plus(svc("{name: ds, namespace: default}", "  clusterIP: \"fd00:96::50\"\n  ipFamilies: [IPv4]\n  ports: [{port: 80}]\n")), "E0305"},
      {"dualstack", "IPv6 address in an IPv4 slice", with_slice(slice(eps_body("{addresses: [\"fd00::5\"]}"))), "E0400"},
      {"dualstack", "IPv4 address in an IPv6 slice", with_slice(slice(eps_body("{addresses: [10.1.0.5]}", "[{name: http, port: 8080}]", "IPv6"))), "E0400"},
      {"dualstack", "two IPv4 clusterCIDRs", with_config(replaced(kConfig, "10.0.0.0/8,fd00::/48", "10.0.0.0/8,10.1.0.0/16")), "E0500"},
      {"dualstack", "IPv4-mapped IPv6 cluster IP",
       plus(svc("{name: ds, namespace: default}", "  clusterIP: \"::ffff:10.96.0.50\"\n  ports: [{port: 80}]\n")), "E0202"},
      {"dualstack", "two IPv6 podCIDRs", with_node(kNode + "spec: {podCIDRs: [\"fd01::/64\", \"fd02::/64\"]}\n"), "E0203"},
      {"dualstack", "two IPv4 podCIDRs", with_node(kNode + "spec: {podCIDRs: [10.1.0.0/24, 10.2.0.0/24]}\n"), "E0203"},
  };
  // Every integer port field, past each bound and at the widths where parsers wrap.
  for (const char* v : {"0", "65536", "-1", "2147483648", "4294967376", "9223372036854775808", "99999999999999999999"}) {
    c.push_back({"bounds", std::string("port ") + v, with_service(svc_ports(std::string("[{name: http, port: ") + v + "}]")), "E0300"});
    c.push_back({"bounds", std::string("targetPort ") + v,
                 with_service(svc_ports(std::string("[{name: http, port: 80, targetPort: ") + v + "}]")), "E0300"});
    if (std::string(v) != "0")
      c.push_back({"bounds", std::string("nodePort ") + v,
                   with_service(svc_ports(std::string("[{name: http, port: 80, nodePort: ") + v + "}]")), "E0300"});
  }
  // Not integers at all (kpc types YAML scalars as kubectl's go-yaml would, but refuses the
  // forms it would read differently: loader_yaml_typing_test.cpp).
  for (const char* v : {"80.5", "1e3", "0x50", "\"80\"", "true"})
    c.push_back({"bounds", std::string("port ") + v, with_service(svc_ports(std::string("[{name: http, port: ") + v + "}]")), "E0100"});
  std::string many;
  for (int i = 0; i < 1001; ++i)
    many += (i ? ", " : "") + std::string("{addresses: [10.2.") + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + "]}";
  c.push_back({"bounds", "1001 endpoints in a slice", with_slice(slice(eps_body(many))), "E0103"});
  return c;
}

std::vector<std::pair<std::string, std::string>> accepted_cases() {
  std::string thousand;
  for (int i = 0; i < 1000; ++i)
    thousand += (i ? ", " : "") + std::string("{addresses: [10.2.") + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + "]}";
  std::string n63(63, 'a');
  return {
      {"port 1", with_service(svc_ports("[{name: http, port: 1, nodePort: 30080}]"))},
      {"port 65535", with_service(svc_ports("[{name: http, port: 65535, nodePort: 30080}]"))},
      {"nodePort 65535", with_service(svc_ports("[{name: http, port: 80, nodePort: 65535}]"))},
      {"targetPort 65535", with_service(svc_ports("[{name: http, port: 80, targetPort: 65535}]"))},
      {"affinity timeout 1", plus(svc2("aff", "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 1}}\n"))},
      {"affinity timeout 86400", plus(svc2("aff", "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 86400}}\n"))},
      {"healthCheckNodePort 65535",
       plus(svc2("lb", "  type: LoadBalancer\n  externalTrafficPolicy: Local\n  healthCheckNodePort: 65535\n", "[{port: 80, nodePort: 30081}]"))},
      {"masqueradeBit 0", with_config(kConfig + "iptables: {masqueradeBit: 0}\n")},
      {"masqueradeBit 31", with_config(kConfig + "iptables: {masqueradeBit: 31}\n")},
      {"Service name of 63 characters", [&] {
         Parts p;
         p.service = svc("{name: " + n63 + ", namespace: default}");
         p.slice = slice(kSliceBody, "{name: web-1, namespace: default, labels: {kubernetes.io/service-name: " + n63 + "}}");
         return p.text();
       }()},
      {"port name of 15 characters", with_service(svc_ports("[{name: " + std::string(15, 'a') + ", port: 80}]"))},
      {"1000 endpoints in a slice", with_slice(slice(eps_body(thousand)))},
      {"one IPv4 and one IPv6 podCIDR", with_node(kNode + "spec: {podCIDRs: [10.1.0.0/24, \"fd01::/64\"]}\n")},
  };
}

struct Ran {
  CommandResult r;
  double seconds = 0;
};
Ran timed(const std::vector<std::string>& argv) {
  // `timeout` turns a hang into a failure (exit 137) instead of a stuck test. The memory
  // bound: 512 MiB of address space (prlimit), where an allocation past it fails and the
  // exit status is no longer 2. Not under the sanitizers, whose shadow memory alone
  // reserves terabytes of address space.
  std::vector<std::string> full = {"timeout", "-s", "KILL", "30"};
  if (kTimeScale == 1.0) full.insert(full.end(), {"prlimit", "--as=536870912", "--"});
  full.insert(full.end(), argv.begin(), argv.end());
  auto t0 = std::chrono::steady_clock::now();
  Ran out{run(full), 0};
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

/// "" if the CLI rejects `file` as the contract says, else what is wrong.
std::string check_rejected(const std::string& dir, const std::string& file, const std::string& code) {
  std::string out = dir + "/out.restore";
  std::string problems;
  std::string base = fs::path(file).filename().string();
  std::regex located(std::regex_replace(base, std::regex(R"([.])"), R"(\.)") + ":[1-9][0-9]*:[1-9][0-9]*: error\\[E[0-9]{4}\\]");
  // validate, then compile for every back end: each must refuse the same way.
  struct Run {
    bool compile;
    const char* backend;
  };
  for (const auto& [compile, backend] : {Run{false, ""}, Run{true, ""}, Run{true, "nftables"}, Run{true, "fastpath"}}) {
    std::vector<std::string> argv = {bin_path("kpc"), compile ? "compile" : "validate", file};
    if (compile) argv.insert(argv.end(), {"-o", out});
    if (*backend) argv.insert(argv.end(), {"--backend", backend});
    Ran ran = timed(argv);
    std::string cmd = compile ? std::string("compile") + (*backend ? std::string(" --backend ") + backend : "") : "validate";
    if (ran.r.exit_code != 2) problems += cmd + " exited " + std::to_string(ran.r.exit_code) + "; ";
    if (ran.seconds > 5 * kTimeScale) problems += cmd + " took " + std::to_string(ran.seconds) + " s; ";
    if (!std::regex_search(ran.r.err, located)) problems += cmd + ": no located error; ";
    if (!code.empty() && ran.r.err.find("error[" + code + "]") == std::string::npos) problems += cmd + ": no " + code + "; ";
    for (unsigned char ch : ran.r.err)
      if ((ch < 0x20 && ch != '\n') || ch == 0x7f) {
        problems += cmd + ": raw control byte on stderr; ";
        break;
      }
    bool temp = false;  // kpc's temp files are ".out.restore.kpc-XXXXXX"
    for (const auto& e : fs::directory_iterator(dir)) temp = temp || e.path().filename().string().starts_with(".out.");
    if (compile && (fs::exists(out) || temp)) problems += "compile wrote its output; ";
    if (compile && !ran.r.out.empty()) problems += "compile printed to stdout; ";
    if (!problems.empty()) return problems + "\n" + ran.r.err.substr(0, 800);
  }
  return "";
}

TEST(AdversarialCli, EveryHostileSnapshotExitsTwoFastLocatedAndWritesNothing) {
  auto cases = rejected_cases();
  ASSERT_GE(cases.size(), 90u);
  std::string dir = temp_dir("adversarial");
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::string file = dir + "/case" + std::to_string(i) + ".yaml";
    write_file(file, c.text);
    std::string problem = check_rejected(dir, file, c.code);
    EXPECT_EQ(problem, "") << "[" << c.group << "] " << c.what;
  }
}

TEST(AdversarialCli, ValuesAtTheBoundsAreAccepted) {
  std::string dir = temp_dir("adversarial-ok");
  for (const auto& [what, text] : accepted_cases()) {
    std::string file = dir + "/ok.yaml", out = dir + "/out.restore";
    write_file(file, text);
    fs::remove(out);
    Ran v = timed({bin_path("kpc"), "validate", file});
    EXPECT_EQ(v.r.exit_code, 0) << what << "\n" << v.r.err;
    for (const char* backend : {"iptables", "ip6tables", "nftables"}) {
      Ran c = timed({bin_path("kpc"), "compile", file, "--backend", backend, "-o", out});
      EXPECT_EQ(c.r.exit_code, 0) << what << " " << backend << "\n" << c.r.err;
      EXPECT_LT(c.seconds, 5 * kTimeScale) << what;
      EXPECT_TRUE(fs::exists(out)) << what;
    }
  }
}

// Kubernetes allows any text in annotations, and kpc skips kinds it does not read: both
// must be accepted and must not change one byte of the program.
TEST(AdversarialCli, IgnoredTextNeverReachesTheProgram) {
  const std::string evil = "x\\\" -j ACCEPT\\nCOMMIT\\n*filter\\n:INPUT ACCEPT [0:0]\\n-A INPUT -j ACCEPT\\n";
  std::vector<std::pair<std::string, std::string>> cases = {
      {"annotation", with_service(svc("{name: web, namespace: default, annotations: {note: \"" + evil + "\", \"kpc.dev/x\": \"-j ACCEPT\"}}"))},
      {"unknown kind", plus("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"" + evil + "\"}\ndata: {a: \"" + evil + "\"}\n")},
      {"unknown apiVersion kind", plus("apiVersion: evil.example/v1\nkind: \"Rule -j ACCEPT\"\nspec: {rule: \"" + evil + "\"}\n")},
  };
  std::string dir = temp_dir("adversarial-ignored");
  write_file(dir + "/base.yaml", Parts{}.text());
  for (const char* backend : {"iptables", "ip6tables", "nftables", "fastpath"}) {
    Ran base = timed({bin_path("kpc"), "compile", dir + "/base.yaml", "--backend", backend});
    ASSERT_EQ(base.r.exit_code, 0) << base.r.err;
    ASSERT_FALSE(base.r.out.empty());
    for (const auto& [what, text] : cases) {
      write_file(dir + "/case.yaml", text);
      Ran c = timed({bin_path("kpc"), "compile", dir + "/case.yaml", "--backend", backend});
      EXPECT_EQ(c.r.exit_code, 0) << what << "\n" << c.r.err;
      EXPECT_EQ(c.r.out, base.r.out) << what << " changed the " << backend << " program";
    }
  }
}

// The committed hostile corpus (tests/hostile/: alias bombs, deep nesting, NUL bytes,
// invalid UTF-8, truncation, injection) through `kpc compile -o` as well as `validate`.
TEST(AdversarialCli, HostileCorpusNeverWritesAProgram) {
  std::string dir = temp_dir("adversarial-corpus");
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(source_path("tests/hostile"))) {
    auto ext = e.path().extension().string();
    if (ext != ".yaml" && ext != ".json") continue;
    ++n;
    EXPECT_EQ(check_rejected(dir, e.path().string(), ""), "") << e.path();
  }
  EXPECT_GE(n, 10u);
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Host facts reach nft rules unquoted (kube-proxy writes `iifname != cbr0` and flowtable
// devices as bare words), so a name iptables takes as one argument can be nft syntax: the
// nftables and fastpath back ends refuse it, located, and write nothing.
TEST(AdversarialCli, NftSyntaxInHostNamesIsRefusedByTheNftBackEnds) {
  std::string dir = temp_dir("adversarial-nft");
  struct C {
    std::string what, text;
    std::vector<const char*> backends;
  };
  std::vector<C> cases = {
      {"bridge interface with ;",
       with_config(kConfig + "detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: \"cbr0;flush\"}\n"),
       {"nftables"}},
      {"interface prefix with a brace",
       with_config(kConfig + "detectLocalMode: InterfaceNamePrefix\ndetectLocal: {interfaceNamePrefix: \"veth}\"}\n"),
       {"nftables"}},
      {"flowtable device with ;", with_env(replaced(kEnv, "name: eth0", "name: \"eth0;x\"")), {"fastpath"}},
  };
  for (const auto& c : cases) {
    std::string file = dir + "/case.yaml", out = dir + "/out.nft";
    write_file(file, c.text);
    for (const char* backend : c.backends) {
      fs::remove(out);
      Ran r = timed({bin_path("kpc"), "compile", file, "--backend", backend, "-o", out});
      EXPECT_EQ(r.r.exit_code, 2) << c.what << " " << backend << "\n" << r.r.err;
      EXPECT_NE(r.r.err.find("case.yaml:"), std::string::npos) << c.what << "\n" << r.r.err;
      EXPECT_NE(r.r.err.find("error[E0500]"), std::string::npos) << c.what << "\n" << r.r.err;
      EXPECT_FALSE(fs::exists(out)) << c.what;
    }
  }
}

}  // namespace
}  // namespace kpc::test
