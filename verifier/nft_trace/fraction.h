// Exact probabilities of nft packet traces.
//
// The randomness of an nft rule set is `numgen random mod N [offset O]`. The model gives
// each of the N values probability exactly 1/N, as nft's documentation and kube-proxy
// state it (issue 16: "each branch exactly 1/N"). The kernel (nft_numgen.c) computes
// reciprocal_scale(random_u32, N) = (r * N) >> 32, which splits the 2^32 values of r into
// N runs whose lengths differ by at most one: for an N that is not a power of two each
// branch is within 2^-32 of 1/N, not exactly 1/N (docs/verifier.md, "nft packet
// semantics"). The iptables tracer's dyadic probabilities (statistic thresholds t / 2^31)
// are exact for their module.
//
// A Fraction is N / D with D a product of small primes (each numgen modulus is at most
// 2^32 - 1 and is factored by trial division), kept as exponents, so that values are
// always in lowest terms (equal probabilities have equal representations) without a
// big-number gcd. The numerator is the verifier's arbitrary-precision BigUInt.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>

#include "verifier/trace/rational.h"

namespace kpc::verifier::nft_trace {

using trace::BigUInt;

class Fraction {
 public:
  Fraction() : num_(1) {}  ///< 1
  static Fraction one() { return Fraction(); }
  static Fraction zero();
  /// 1 / n (n >= 1).
  static Fraction reciprocal(uint32_t n);
  /// An iptables statistic probability (N / 2^k).
  static Fraction from_dyadic(const trace::Probability& p);

  Fraction operator*(const Fraction& o) const;
  Fraction operator+(const Fraction& o) const;
  Fraction complement() const;  ///< 1 - p (p <= 1)
  bool is_zero() const { return num_.is_zero(); }
  bool is_one() const { return den_.empty() && num_ == BigUInt(1); }

  const BigUInt& numerator() const { return num_; }
  BigUInt denominator() const;
  /// The denominator's prime factors and exponents (empty: denominator 1).
  const std::map<uint32_t, uint32_t>& denominator_factors() const { return den_; }
  /// log2 of the denominator when it is a power of two (else -1).
  int denominator_log2() const;
  std::string fraction() const;  ///< "N/D" in lowest terms ("1", "0")
  std::string decimal(int digits = 10) const;  ///< rounded half up
  double to_double() const;

  friend bool operator==(const Fraction& a, const Fraction& b) = default;
  friend std::strong_ordering operator<=>(const Fraction& a, const Fraction& b);

 private:
  void reduce();
  BigUInt num_;
  std::map<uint32_t, uint32_t> den_;  ///< prime -> exponent
};

}  // namespace kpc::verifier::nft_trace
