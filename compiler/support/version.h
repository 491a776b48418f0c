// kpc's version and the kube-proxy it reproduces (docs/compatibility.md).
#pragma once

namespace kpc {

inline constexpr const char* kVersion = "0.1.0";
inline constexpr const char* kKubeProxyCommit = "531be81208e2274ef42e72525a26610a9622bcdf";
inline constexpr const char* kVersionLine =
    "kpc 0.1.0 (reproduces kube-proxy v1.33+, kubernetes/kubernetes@531be812)";

}  // namespace kpc
