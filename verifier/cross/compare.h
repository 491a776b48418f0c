// The cross-mode comparison (issue 16 §4): every representative packet of the space the two
// programs name (packets(), below) is traced by both front ends; a packet whose exact outcome
// distributions differ is a difference, named by the known difference that explains it
// (known_differences.h) or reported as a surprise, by Service and service port.
//
// What this proves, precisely: the two programs agree (or differ only in documented ways) on
// every packet of this enumeration -- each destination either program names (service
// address/protocol/port, NodePorts on every node address and on 127.0.0.1, each endpoint,
// one other port per service address, one unallocated address per service CIDR, one address
// and port nobody names), from a pod in the cluster CIDR, an external client, the node itself,
// the chosen endpoints themselves (hairpin) and localhost; first packets, established and
// invalid ones; new and remembered affinity clients. It is an exhaustive check over these
// representative packets, not yet a per-class proof: packets of the same destination that
// differ in fields no rule of kube-proxy's tests (other source addresses, interfaces, marks)
// are not covered. The symbolic front ends are to replace the enumeration.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "verifier/cross/frontend.h"
#include "verifier/cross/known_differences.h"

namespace kpc::verifier::cross {

/// The packets of a space, before the ones that depend on a trace (hairpin sources and
/// remembered clients, which compare() adds from the endpoints each service reaches).
std::vector<Packet> packets(const PacketSpace& space);

struct Cell {
  Packet packet;
  Distribution a, b;
  std::string service;  ///< "ns/name:port", or "(no service)"
  std::vector<std::string> known;  ///< the known differences' ids; empty: a surprise
  bool undecided = false;  ///< a side could not decide (Unknown): counted as a surprise
};

struct ServiceSummary {
  size_t packets = 0;                      ///< packets traced for this service
  size_t known = 0, surprises = 0;
  std::map<std::string, size_t> by_known;  ///< known id -> cells
};

struct CrossResult {
  std::string backend_a, backend_b;
  IPFamily family = IPFamily::V4;
  size_t packets = 0;                    ///< packets traced (by each side)
  std::vector<Cell> differences;         ///< every differing cell, in packet order
  std::map<std::string, ServiceSummary> services;
  std::map<std::string, size_t> known_counts;  ///< id -> cells
  std::map<std::string, size_t> known_example;  ///< id -> index of its first cell in differences
  size_t surprises = 0;
  size_t undecided = 0;
  bool first_packets_only = false;  ///< the space held first packets only (PacketSpace)
  /// How the packets were chosen. false: the representative packets of packets() (by sample).
  /// true: every packet class of both programs (by_class.h): `packets` is then the witnesses
  /// traced, one per differing class, and each cell's packet is its class's witness.
  bool per_class = false;
  size_t classes = 0;        ///< per_class: the classes compared (every packet, both origins)
  size_t atoms = 0;          ///< per_class: the destination atoms explored
  /// per_class: differing classes whose witnesses have the same mode-neutral outcome
  /// (outcome.h: the modes spell them differently, e.g. recent lists vs affinity sets).
  size_t same_neutral = 0;
  /// per_class: a side's symbolic answer disagreed with its own concrete tracer (a bug in kpc).
  std::vector<std::string> self_check_failures;
  /// Exit status: 0 when every difference is a known one, 1 otherwise.
  bool only_known() const { return surprises == 0; }
};

struct CompareOptions {
  size_t max_hairpin = 2;  ///< endpoints per service tried as the source (hairpin)
  /// 2: each side's packets traced on a thread of its own (the two tracers share nothing;
  /// each front end serialises its own tracer). 1: both on the caller's thread. The result is
  /// the same either way (packets are traced in batches and consumed in queue order).
  unsigned threads = 2;
  size_t batch = 2048;  ///< packets traced per side between two consuming passes (>= 1)
};

CrossResult compare(const ConcreteFrontend& a, const ConcreteFrontend& b, const PacketSpace& space,
                    const CompareOptions& options = {});

/// Builds the space from both front ends' cut points (local addresses as given).
PacketSpace build_space(const ConcreteFrontend& a, const ConcreteFrontend& b, IPFamily family,
                        std::vector<IPAddr> local_addresses);

}  // namespace kpc::verifier::cross
