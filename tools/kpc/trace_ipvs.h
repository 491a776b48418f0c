// `kpc trace` on an IPVS program set (issue 17 §3): the directory `kpc compile --backend ipvs -o
// DIR` writes (ipvs.rules, ipset.rules, iptables.rules, node.plan), its ipvs.rules file (the
// others read beside it), or a snapshot compiled with the IPVS back end first. cmd_trace.cpp
// decides the back end (--backend ipvs, a directory holding ipvs.rules, or a snapshot whose
// mode is ipvs) and hands the request here; the tracer is verifier/ipvs_trace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::verifier::ipvs_trace {
struct ProgramSet;
}

namespace kpc::cli {

struct IpvsTraceRequest {
  std::string rules;  ///< directory, ipvs.rules path, or snapshot
  std::string src, dst, proto, from;
  int dport = -1, sport = -1;
  std::vector<std::string> local_addresses;
  std::string in_iface, out_iface, mark, ctstate;
  std::string in_bridge_port, out_bridge_port;
  bool no_bridge_port = false, routed = false;
  std::vector<std::string> affinity;  ///< "new", or the real server IP:PORT the client's template names
  uint32_t affinity_age = 0;
  std::string shares = "exact";  ///< --ipvs-shares: exact (Unknown for lc/sh/mh/...) or weighted
  std::string format;
  size_t max_outcomes = 100000;
  std::vector<std::string> expect_dnat;
  std::string expect_verdict, expect_masquerade;
  uint64_t max_input_size = 0;
  std::string node;
  bool verbose = false;
};

/// Where an IPVS program set comes from (kpc trace, kpc diff --from-backend ipvs).
struct IpvsLoadRequest {
  std::string path;  ///< directory, ipvs.rules path, or snapshot
  uint64_t max_input_size = 0;
  std::string node;  ///< --node when path is a snapshot
};

/// Reads the program set at r.path (the files, or a snapshot compiled with the IPVS back end);
/// node_addresses: a snapshot's Node's; notes: what was assumed. False with the error printed
/// (located: file and line).
bool load_ipvs_program_set(const IpvsLoadRequest& r, IPFamily family, verifier::ipvs_trace::ProgramSet* set,
                           std::vector<IPAddr>* node_addresses, std::vector<std::string>* notes);

/// True when path is a directory holding ipvs.rules, or a file named ipvs.rules.
bool looks_like_ipvs_program_set(const std::string& path);

/// Runs the trace; the exit code (0 traced, 1 an --expect-* assertion failed, 2 bad input).
int run_trace_ipvs(const IpvsTraceRequest& r);

}  // namespace kpc::cli
