// Exact probabilities for the packet tracer.
//
// The only source of randomness in a ruleset is `-m statistic --mode random
// --probability P`; the kernel keeps the 31-bit threshold t = lround(2^31 * P)
// and matches when (random_u32 & 0x7fffffff) < t, so a rule matches with
// probability exactly t / 2^31 and misses with (2^31 - t) / 2^31. Every branch
// probability is therefore a product of such factors: a dyadic rational
// N / 2^k. The denominator of a cascade over n endpoints reaches 2^(31 n) (a
// 10-endpoint service needs 310 bits, more than a 128-bit integer holds), so
// the numerator is an arbitrary-precision integer and the denominator is kept
// as its exponent. Values are always reduced (gcd(N, 2^k) = 1: N odd, or k = 0),
// so equal probabilities have equal representations.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace kpc::verifier::trace {

/// Non-negative arbitrary-precision integer (little-endian 32-bit limbs, no leading zero limbs).
class BigUInt {
 public:
  BigUInt() = default;
  explicit BigUInt(uint64_t v);
  bool is_zero() const { return limbs_.empty(); }
  size_t bit_length() const;
  size_t trailing_zeros() const;  ///< 0 for zero
  BigUInt& operator+=(const BigUInt& o);
  BigUInt& operator-=(const BigUInt& o);  ///< requires *this >= o
  BigUInt operator*(const BigUInt& o) const;
  BigUInt& mul_small(uint32_t m);
  BigUInt& add_small(uint32_t a);
  BigUInt& shl(size_t bits);
  BigUInt& shr(size_t bits);
  uint32_t divmod_small(uint32_t d);  ///< *this /= d, returns the remainder
  std::string str() const;            ///< decimal
  /// The limbs as bytes: a cheap exact key (decimal conversion is quadratic in the digits).
  std::string raw() const {
    return std::string(reinterpret_cast<const char*>(limbs_.data()), limbs_.size() * sizeof(uint32_t));
  }
  double to_double() const;
  /// Fits in 64 bits: the value, else nullopt-like false.
  bool to_u64(uint64_t* out) const;
  friend std::strong_ordering operator<=>(const BigUInt& a, const BigUInt& b);
  friend bool operator==(const BigUInt& a, const BigUInt& b) = default;

 private:
  void trim();
  std::vector<uint32_t> limbs_;
};

/// An exact probability N / 2^k in [0, 1], always reduced.
class Probability {
 public:
  Probability() : num_(1), exp_(0) {}  ///< 1
  static Probability one() { return Probability(); }
  static Probability zero();
  /// t / 2^bits (t <= 2^bits); the kernel's statistic threshold uses bits = 31.
  static Probability ratio_pow2(uint64_t t, uint32_t bits);
  /// The probability that `-m statistic --mode random` with this 31-bit threshold matches.
  static Probability statistic_match(uint32_t threshold) {
    return ratio_pow2(threshold > (1u << 31) ? (1u << 31) : threshold, 31);
  }

  Probability operator*(const Probability& o) const;
  Probability operator+(const Probability& o) const;
  Probability complement() const;  ///< 1 - p
  bool is_zero() const { return num_.is_zero(); }
  bool is_one() const { return exp_ == 0 && num_ == BigUInt(1); }

  const BigUInt& numerator() const { return num_; }
  uint32_t denominator_log2() const { return exp_; }  ///< denominator = 2^k
  BigUInt denominator() const;
  /// "N/D" in lowest terms ("1" and "0" for the extremes).
  std::string fraction() const;
  /// Rounded half up to `digits` decimals: "0.3333333330".
  std::string decimal(int digits = 10) const;
  double to_double() const;

  friend bool operator==(const Probability& a, const Probability& b) = default;
  friend std::strong_ordering operator<=>(const Probability& a, const Probability& b);

 private:
  Probability(BigUInt n, uint32_t e) : num_(std::move(n)), exp_(e) { reduce(); }
  void reduce();
  BigUInt num_;
  uint32_t exp_ = 0;
};

}  // namespace kpc::verifier::trace
