// One mode-neutral outcome of a packet (issue 16 §4, cross-back-end diff): what a packet's
// fate is, whatever program kind decided it, so that an iptables trace and an nft trace (and
// later an IPVS one) can be compared field by field.
//
// The mapping of each mode's spelling (docs/verifier.md, "Cross-mode diff"):
//   verdict      ACCEPT/DROP/REJECT of iptables = accept/drop/reject of nft; Unknown stays Unknown
//   route        "local" (INPUT), "forward", "output" -- the tracers' own words, the same in both
//   dnat         "ip:port" ("[v6]:port"): iptables DNAT --to-destination = nft dnat to
//   masquerade   iptables MASQUERADE = nft masquerade; snat: the SNAT --to-source / snat to text
//   mark         the packet's final mark (both tracers give it after POSTROUTING / postrouting)
//   affinity     "the kernel remembers this client for session affinity": any iptables
//                `-m recent --set/--update` that found or wrote the client = nft `update @affinity-*`
//   options      behaviour-bearing flags, normalised to one spelling:
//                  iptables `REJECT` (default icmp[6]-port-unreachable) = nft `reject` = ""
//                  (nft's bare reject is ICMP port-unreachable, the same as iptables' default);
//                  `--reject-with tcp-reset` = `reject with tcp reset` = "reject tcp-reset";
//                  `MASQUERADE --random-fully` = `masquerade fully-random` = "masquerade fully-random"
//   probability  exact: iptables' dyadic shares (t/2^31 products) and nft's 1/N shares are both
//                nft_trace::Fraction (Fraction::from_dyadic), so equality is exact equality.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "verifier/nft_trace/fraction.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::cross {

using nft_trace::Fraction;
using trace::Verdict;

struct Outcome {
  Verdict verdict = Verdict::Accept;
  std::string route;
  std::string dnat;  ///< "" without DNAT
  bool masquerade = false;
  std::string snat;
  uint32_t mark = 0;
  bool affinity = false;
  std::string options;         ///< normalised (see the file comment)
  std::string unknown_reason;  ///< Verdict::Unknown only; not part of the comparison key

  /// The comparison key: every field but unknown_reason (an Unknown is never equal to anything,
  /// see Distribution::decided).
  std::string key() const;
  /// "accept forward dnat 10.244.1.2:53 masquerade" (a reviewer's words).
  std::string text() const;
};

/// key(a) <=> key(b) (-1, 0, 1) without building either key.
int compare_keys(const Outcome& a, const Outcome& b);

struct Share {
  Outcome outcome;
  Fraction probability;
};

/// A packet's outcomes with exact probabilities, equal outcomes merged, sorted by key.
struct Distribution {
  std::vector<Share> shares;
  std::vector<std::string> services;  ///< "ns/name:port" named on the paths, first seen first
  bool decided() const;               ///< no Unknown share
  std::string text() const;           ///< "1/2 accept forward dnat A; 1/2 accept forward dnat B"
  /// Adds (merging by key; keeps shares sorted).
  void add(const Outcome& o, const Fraction& p);
};

/// Same outcomes with exactly the same probabilities (both decided).
bool same(const Distribution& a, const Distribution& b);

/// The option spellings of each mode, normalised (file comment). Exposed for the tests.
std::string normalise_iptables_options(const std::string& options);
std::string normalise_nft_options(const std::string& options);

/// The adapters.
Distribution from_iptables(const trace::TraceResult& r);
Distribution from_nft(const nft_trace::TraceResult& r);

/// "ns/name:port" as both modes name a service port ("ns/name" for an unnamed port).
std::string normalise_service(std::string s);

}  // namespace kpc::verifier::cross
