#include "bench/synthetic_cluster.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace kpc::bench {
namespace {

// Emits objects through a tiny writer that knows both syntaxes, so the JSON and
// YAML files describe exactly the same cluster.
class Writer {
 public:
  explicit Writer(bool json) : json_(json) {}
  std::string out;

  void begin_list() { out += json_ ? "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n" : ""; }
  void end_list() { out += json_ ? "\n]}\n" : ""; }
  void object(const std::string& json_text, const std::string& yaml_text) {
    if (json_) {
      if (count_++) out += ",\n";
      out += json_text;
    } else {
      out += yaml_text;
      out += "---\n";
    }
  }

 private:
  bool json_;
  int count_ = 0;
};

std::string ip4(int a, int b, int c, int d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%d.%d.%d", a, b, c, d);
  return buf;
}

void emit(Writer& w, const ClusterShape& s) {
  w.begin_list();
  w.object(
      "{\"apiVersion\":\"kubeproxy.config.k8s.io/v1alpha1\",\"kind\":\"KubeProxyConfiguration\",\"mode\":\"iptables\","
      "\"hostnameOverride\":\"node-0\",\"clusterCIDR\":\"10.0.0.0/8\"}",
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n"
      "hostnameOverride: node-0\nclusterCIDR: 10.0.0.0/8\n");
  for (int n = 0; n < s.nodes; ++n) {
    std::string name = "node-" + std::to_string(n), ip = ip4(192, 168, n / 250, n % 250 + 1);
    std::string zone = "zone-" + std::to_string(n % 3);
    w.object("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"" + name +
                 "\",\"labels\":{\"topology.kubernetes.io/zone\":\"" + zone + "\"}},\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"" +
                 ip + "\"}]}}",
             "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n  labels:\n    topology.kubernetes.io/zone: " +
                 zone + "\nstatus:\n  addresses:\n  - type: InternalIP\n    address: " + ip + "\n");
  }
  for (int i = 0; i < s.services; ++i) {
    std::string ns = "ns-" + std::to_string(i % 100), name = "svc-" + std::to_string(i);
    std::string cip = ip4(172, 20 + i / 65536, (i / 256) % 256, i % 256);
    int kind = i % 10;  // 0-6 ClusterIP, 7-8 NodePort, 9 LoadBalancer
    bool two_ports = i % 5 == 0, affinity = i % 7 == 0, local = kind >= 7 && i % 3 == 0;
    std::string type = kind < 7 ? "ClusterIP" : kind < 9 ? "NodePort" : "LoadBalancer";
    int np = 30000 + (i / 10) * 3 + (kind - 7);  // unique per Service
    bool has_np = kind >= 7;
    // ---- Service
    std::string jports = "{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":80,\"targetPort\":8080" +
                         (has_np ? ",\"nodePort\":" + std::to_string(np) : std::string()) + "}";
    std::string yports = "  - name: http\n    protocol: TCP\n    port: 80\n    targetPort: 8080\n" +
                         (has_np ? "    nodePort: " + std::to_string(np) + "\n" : std::string());
    if (two_ports) {
      jports += ",{\"name\":\"metrics\",\"protocol\":\"TCP\",\"port\":9090,\"targetPort\":9090}";
      yports += "  - name: metrics\n    protocol: TCP\n    port: 9090\n    targetPort: 9090\n";
    }
    std::string jextra, yextra, jstatus = "{}", ystatus = "  loadBalancer: {}\n";
    if (affinity) {
      jextra += ",\"sessionAffinity\":\"ClientIP\",\"sessionAffinityConfig\":{\"clientIP\":{\"timeoutSeconds\":600}}";
      yextra += "  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 600\n";
    }
    if (local) {
      jextra += ",\"externalTrafficPolicy\":\"Local\"";
      yextra += "  externalTrafficPolicy: Local\n";
    }
    if (kind == 9) {
      std::string lb = ip4(203, 0, (i / 256) % 256, i % 256);
      jextra += ",\"loadBalancerSourceRanges\":[\"198.51.100.0/24\"]";
      yextra += "  loadBalancerSourceRanges:\n  - 198.51.100.0/24\n";
      jstatus = "{\"loadBalancer\":{\"ingress\":[{\"ip\":\"" + lb + "\",\"ipMode\":\"VIP\"}]}}";
      ystatus = "  loadBalancer:\n    ingress:\n    - ip: " + lb + "\n      ipMode: VIP\n";
    }
    w.object("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"" + name + "\",\"namespace\":\"" + ns +
                 "\",\"uid\":\"00000000-0000-0000-0000-" + std::to_string(100000000000 + i) +
                 "\",\"resourceVersion\":\"" + std::to_string(1000 + i) + "\"},\"spec\":{\"type\":\"" + type +
                 "\",\"clusterIP\":\"" + cip + "\",\"clusterIPs\":[\"" + cip +
                 "\"],\"ipFamilies\":[\"IPv4\"],\"ipFamilyPolicy\":\"SingleStack\",\"ports\":[" + jports + "]" + jextra +
                 "},\"status\":" + jstatus + "}",
             "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
                 "\n  uid: 00000000-0000-0000-0000-" + std::to_string(100000000000 + i) + "\n  resourceVersion: \"" +
                 std::to_string(1000 + i) + "\"\nspec:\n  type: " + type + "\n  clusterIP: " + cip +
                 "\n  clusterIPs:\n  - " + cip + "\n  ipFamilies:\n  - IPv4\n  ipFamilyPolicy: SingleStack\n  ports:\n" +
                 yports + yextra + "status:\n" + ystatus);
    // ---- EndpointSlice
    std::string jeps, yeps;
    for (int e = 0; e < s.endpoints_per_service; ++e) {
      int flat = i * s.endpoints_per_service + e;
      std::string addr = ip4(10, 1 + flat / 65536, (flat / 256) % 256, flat % 256);
      std::string node = "node-" + std::to_string(flat % s.nodes);
      bool terminating = e == s.endpoints_per_service - 1 && i % 4 == 0;
      std::string cond = terminating ? "\"ready\":false,\"serving\":true,\"terminating\":true"
                                     : "\"ready\":true,\"serving\":true,\"terminating\":false";
      std::string ycond = terminating ? "      ready: false\n      serving: true\n      terminating: true\n"
                                      : "      ready: true\n      serving: true\n      terminating: false\n";
      if (e) jeps += ",";
      jeps += "{\"addresses\":[\"" + addr + "\"],\"conditions\":{" + cond + "},\"nodeName\":\"" + node +
              "\",\"zone\":\"zone-" + std::to_string(flat % 3) + "\"}";
      yeps += "  - addresses:\n    - " + addr + "\n    conditions:\n" + ycond + "    nodeName: " + node +
              "\n    zone: zone-" + std::to_string(flat % 3) + "\n";
    }
    std::string jsports = "{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":8080}";
    std::string ysports = "- name: http\n  protocol: TCP\n  port: 8080\n";
    if (two_ports) {
      jsports += ",{\"name\":\"metrics\",\"protocol\":\"TCP\",\"port\":9090}";
      ysports += "- name: metrics\n  protocol: TCP\n  port: 9090\n";
    }
    w.object("{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"" + name +
                 "-abcde\",\"namespace\":\"" + ns + "\",\"labels\":{\"kubernetes.io/service-name\":\"" + name +
                 "\",\"endpointslice.kubernetes.io/managed-by\":\"endpointslice-controller.k8s.io\"}},\"addressType\":\"IPv4\","
                 "\"endpoints\":[" + jeps + "],\"ports\":[" + jsports + "]}",
             "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: " + name + "-abcde\n  namespace: " +
                 ns + "\n  labels:\n    kubernetes.io/service-name: " + name +
                 "\n    endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io\naddressType: IPv4\nendpoints:\n" +
                 yeps + "ports:\n" + ysports);
  }
  w.end_list();
}

}  // namespace

std::string synthetic_cluster_json(const ClusterShape& shape) {
  Writer w(true);
  emit(w, shape);
  // Indent as `kubectl get -o json` does (indented; 2 spaces keeps the 10k-Service file near the 30 MB reference), so sizes match real snapshots.
  return nlohmann::json::parse(w.out).dump(2) + "\n";
}

std::string synthetic_cluster_yaml(const ClusterShape& shape) {
  Writer w(false);
  emit(w, shape);
  return std::move(w.out);
}

}  // namespace kpc::bench
