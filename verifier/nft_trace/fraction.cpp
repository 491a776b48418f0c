#include "verifier/nft_trace/fraction.h"

#include <vector>

namespace kpc::verifier::nft_trace {
namespace {

// The prime factors of n (trial division: n < 2^32, so primes up to 65536 suffice).
std::map<uint32_t, uint32_t> factor(uint32_t n) {
  std::map<uint32_t, uint32_t> out;
  for (uint32_t p = 2; static_cast<uint64_t>(p) * p <= n; p += (p == 2 ? 1 : 2)) {
    while (n % p == 0) {
      ++out[p];
      n /= p;
    }
  }
  if (n > 1) ++out[n];
  return out;
}

}  // namespace

Fraction Fraction::zero() {
  Fraction f;
  f.num_ = BigUInt();
  return f;
}

Fraction Fraction::reciprocal(uint32_t n) {
  Fraction f;
  if (n > 1) f.den_ = factor(n);
  return f;
}

Fraction Fraction::from_dyadic(const trace::Probability& p) {
  Fraction f;
  f.num_ = p.numerator();
  if (p.denominator_log2()) f.den_[2] = p.denominator_log2();
  f.reduce();
  return f;
}

void Fraction::reduce() {
  if (num_.is_zero()) {
    den_.clear();
    return;
  }
  for (auto it = den_.begin(); it != den_.end();) {
    while (it->second > 0) {
      BigUInt q = num_;
      if (q.divmod_small(it->first) != 0) break;
      num_ = std::move(q);
      --it->second;
    }
    it = it->second == 0 ? den_.erase(it) : std::next(it);
  }
}

BigUInt Fraction::denominator() const {
  // The power of two as a shift: iptables' dyadic shares bring 2^31 and more, and this runs
  // for every comparison of unequal denominators (the cross diff's numgen-shares check).
  BigUInt d(1);
  uint32_t twos = 0;
  for (const auto& [p, e] : den_) {
    if (p == 2) twos = e;
    else for (uint32_t i = 0; i < e; ++i) d.mul_small(p);
  }
  if (twos) d.shl(twos);
  return d;
}

int Fraction::denominator_log2() const {
  if (den_.empty()) return 0;
  if (den_.size() == 1 && den_.begin()->first == 2) return static_cast<int>(den_.begin()->second);
  return -1;
}

Fraction Fraction::operator*(const Fraction& o) const {
  Fraction r;
  r.num_ = num_ * o.num_;
  r.den_ = den_;
  for (const auto& [p, e] : o.den_) r.den_[p] += e;
  r.reduce();
  return r;
}

Fraction Fraction::operator+(const Fraction& o) const {
  // Common denominator: the larger exponent of each prime.
  Fraction r;
  r.den_ = den_;
  for (const auto& [p, e] : o.den_) r.den_[p] = std::max(r.den_[p], e);
  auto scaled = [&](const Fraction& f) {
    BigUInt n = f.num_;
    for (const auto& [p, e] : r.den_) {
      auto it = f.den_.find(p);
      uint32_t have = it == f.den_.end() ? 0 : it->second;
      for (uint32_t i = have; i < e; ++i) n.mul_small(p);
    }
    return n;
  };
  r.num_ = scaled(*this);
  r.num_ += scaled(o);
  r.reduce();
  return r;
}

Fraction Fraction::complement() const {
  Fraction r;
  r.den_ = den_;
  BigUInt d = denominator();
  d -= num_;
  r.num_ = std::move(d);
  r.reduce();
  return r;
}

std::strong_ordering operator<=>(const Fraction& a, const Fraction& b) {
  if (a.den_ == b.den_) return a.num_ <=> b.num_;  // the same denominator: no products
  return a.num_ * b.denominator() <=> b.num_ * a.denominator();
}

std::string Fraction::fraction() const {
  if (num_.is_zero()) return "0";
  if (den_.empty()) return num_.str();
  return num_.str() + "/" + denominator().str();
}

std::string Fraction::decimal(int digits) const {
  // floor(num * 10^(digits+1) / den), dividing by each prime factor in turn (floor of
  // floors is the floor of the quotient), then round half up on the last digit.
  BigUInt n = num_;
  for (int i = 0; i <= digits; ++i) n.mul_small(10);
  for (const auto& [p, e] : den_)
    for (uint32_t i = 0; i < e; ++i) n.divmod_small(p);
  uint32_t last = n.divmod_small(10);
  if (last >= 5) n.add_small(1);
  std::string s = n.str();
  if (static_cast<int>(s.size()) <= digits) s = std::string(digits + 1 - s.size(), '0') + s;
  std::string out = s.substr(0, s.size() - digits);
  if (digits > 0) out += "." + s.substr(s.size() - digits);
  return out;
}

double Fraction::to_double() const { return num_.to_double() / denominator().to_double(); }

}  // namespace kpc::verifier::nft_trace
