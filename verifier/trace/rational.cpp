#include "verifier/trace/rational.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kpc::verifier::trace {

BigUInt::BigUInt(uint64_t v) {
  while (v) {
    limbs_.push_back(static_cast<uint32_t>(v));
    v >>= 32;
  }
}

void BigUInt::trim() {
  while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
}

size_t BigUInt::bit_length() const {
  if (limbs_.empty()) return 0;
  return (limbs_.size() - 1) * 32 + (32 - static_cast<size_t>(std::countl_zero(limbs_.back())));
}

size_t BigUInt::trailing_zeros() const {
  for (size_t i = 0; i < limbs_.size(); ++i)
    if (limbs_[i]) return i * 32 + static_cast<size_t>(std::countr_zero(limbs_[i]));
  return 0;
}

BigUInt& BigUInt::operator+=(const BigUInt& o) {
  if (limbs_.size() < o.limbs_.size()) limbs_.resize(o.limbs_.size(), 0);
  uint64_t carry = 0;
  for (size_t i = 0; i < limbs_.size(); ++i) {
    uint64_t s = uint64_t(limbs_[i]) + (i < o.limbs_.size() ? o.limbs_[i] : 0) + carry;
    limbs_[i] = static_cast<uint32_t>(s);
    carry = s >> 32;
  }
  if (carry) limbs_.push_back(static_cast<uint32_t>(carry));
  return *this;
}

BigUInt& BigUInt::operator-=(const BigUInt& o) {
  int64_t borrow = 0;
  for (size_t i = 0; i < limbs_.size(); ++i) {
    int64_t d = int64_t(limbs_[i]) - (i < o.limbs_.size() ? int64_t(o.limbs_[i]) : 0) - borrow;
    borrow = d < 0;
    if (d < 0) d += int64_t(1) << 32;
    limbs_[i] = static_cast<uint32_t>(d);
  }
  trim();
  return *this;
}

BigUInt BigUInt::operator*(const BigUInt& o) const {
  BigUInt r;
  if (is_zero() || o.is_zero()) return r;
  r.limbs_.assign(limbs_.size() + o.limbs_.size(), 0);
  for (size_t i = 0; i < limbs_.size(); ++i) {
    uint64_t carry = 0;
    for (size_t j = 0; j < o.limbs_.size(); ++j) {
      uint64_t cur = uint64_t(limbs_[i]) * o.limbs_[j] + r.limbs_[i + j] + carry;
      r.limbs_[i + j] = static_cast<uint32_t>(cur);
      carry = cur >> 32;
    }
    size_t k = i + o.limbs_.size();
    while (carry) {
      uint64_t cur = uint64_t(r.limbs_[k]) + carry;
      r.limbs_[k] = static_cast<uint32_t>(cur);
      carry = cur >> 32;
      ++k;
    }
  }
  r.trim();
  return r;
}

BigUInt& BigUInt::mul_small(uint32_t m) {
  uint64_t carry = 0;
  for (auto& l : limbs_) {
    uint64_t cur = uint64_t(l) * m + carry;
    l = static_cast<uint32_t>(cur);
    carry = cur >> 32;
  }
  if (carry) limbs_.push_back(static_cast<uint32_t>(carry));
  trim();
  return *this;
}

BigUInt& BigUInt::add_small(uint32_t a) { return *this += BigUInt(a); }

BigUInt& BigUInt::shl(size_t bits) {
  if (is_zero() || bits == 0) return *this;
  size_t words = bits / 32, rest = bits % 32;
  if (rest) {
    uint32_t carry = 0;
    for (auto& l : limbs_) {
      uint32_t next = l >> (32 - rest);
      l = (l << rest) | carry;
      carry = next;
    }
    if (carry) limbs_.push_back(carry);
  }
  limbs_.insert(limbs_.begin(), words, 0);
  return *this;
}

BigUInt& BigUInt::shr(size_t bits) {
  size_t words = bits / 32, rest = bits % 32;
  if (words >= limbs_.size()) {
    limbs_.clear();
    return *this;
  }
  limbs_.erase(limbs_.begin(), limbs_.begin() + static_cast<std::ptrdiff_t>(words));
  if (rest) {
    for (size_t i = 0; i < limbs_.size(); ++i) {
      uint32_t hi = i + 1 < limbs_.size() ? limbs_[i + 1] : 0;
      limbs_[i] = (limbs_[i] >> rest) | (hi << (32 - rest));
    }
  }
  trim();
  return *this;
}

uint32_t BigUInt::divmod_small(uint32_t d) {
  uint64_t rem = 0;
  for (size_t i = limbs_.size(); i-- > 0;) {
    uint64_t cur = (rem << 32) | limbs_[i];
    limbs_[i] = static_cast<uint32_t>(cur / d);
    rem = cur % d;
  }
  trim();
  return static_cast<uint32_t>(rem);
}

std::string BigUInt::str() const {
  if (is_zero()) return "0";
  BigUInt t = *this;
  std::vector<uint32_t> chunks;  // base 1e9, least significant first
  while (!t.is_zero()) chunks.push_back(t.divmod_small(1000000000u));
  std::string out = std::to_string(chunks.back());
  for (size_t i = chunks.size() - 1; i-- > 0;) {
    std::string c = std::to_string(chunks[i]);
    out.append(9 - c.size(), '0');
    out += c;
  }
  return out;
}

double BigUInt::to_double() const {
  double r = 0;
  for (size_t i = limbs_.size(); i-- > 0;) r = r * 4294967296.0 + limbs_[i];
  return r;
}

bool BigUInt::to_u64(uint64_t* out) const {
  if (limbs_.size() > 2) return false;
  uint64_t v = 0;
  for (size_t i = limbs_.size(); i-- > 0;) v = (v << 32) | limbs_[i];
  *out = v;
  return true;
}

std::strong_ordering operator<=>(const BigUInt& a, const BigUInt& b) {
  if (a.limbs_.size() != b.limbs_.size()) return a.limbs_.size() <=> b.limbs_.size();
  for (size_t i = a.limbs_.size(); i-- > 0;)
    if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] <=> b.limbs_[i];
  return std::strong_ordering::equal;
}

// ---------------------------------------------------------------- Probability

Probability Probability::zero() { return Probability(BigUInt(), 0); }

Probability Probability::ratio_pow2(uint64_t t, uint32_t bits) { return Probability(BigUInt(t), bits); }

void Probability::reduce() {
  if (num_.is_zero()) {
    exp_ = 0;
    return;
  }
  size_t tz = std::min<size_t>(num_.trailing_zeros(), exp_);
  if (tz) {
    num_.shr(tz);
    exp_ -= static_cast<uint32_t>(tz);
  }
}

Probability Probability::operator*(const Probability& o) const { return Probability(num_ * o.num_, exp_ + o.exp_); }

Probability Probability::operator+(const Probability& o) const {
  uint32_t e = std::max(exp_, o.exp_);
  BigUInt a = num_, b = o.num_;
  a.shl(e - exp_);
  b.shl(e - o.exp_);
  a += b;
  return Probability(std::move(a), e);
}

Probability Probability::complement() const {
  BigUInt one(1);
  one.shl(exp_);
  one -= num_;
  return Probability(std::move(one), exp_);
}

BigUInt Probability::denominator() const {
  BigUInt d(1);
  d.shl(exp_);
  return d;
}

std::string Probability::fraction() const {
  if (exp_ == 0) return num_.str();
  return num_.str() + "/" + denominator().str();
}

std::string Probability::decimal(int digits) const {
  // round(N * 10^digits / 2^k), half up.
  BigUInt scaled = num_;
  for (int i = 0; i < digits; ++i) scaled.mul_small(10);
  if (exp_ > 0) {
    BigUInt half(1);
    half.shl(exp_ - 1);
    scaled += half;
    scaled.shr(exp_);
  }
  std::string s = scaled.str();
  if (digits <= 0) return s;
  if (s.size() <= static_cast<size_t>(digits)) s.insert(0, static_cast<size_t>(digits) + 1 - s.size(), '0');
  s.insert(s.size() - static_cast<size_t>(digits), ".");
  return s;
}

double Probability::to_double() const {
  // Scale down both parts together so that long numerators do not overflow a double.
  size_t bl = num_.bit_length();
  if (bl <= 1000) return std::ldexp(num_.to_double(), -static_cast<int>(exp_));
  BigUInt n = num_;
  size_t drop = bl - 64;
  n.shr(drop);
  return std::ldexp(n.to_double(), static_cast<int>(drop) - static_cast<int>(exp_));
}

std::strong_ordering operator<=>(const Probability& a, const Probability& b) {
  uint32_t e = std::max(a.exp_, b.exp_);
  BigUInt x = a.num_, y = b.num_;
  x.shl(e - a.exp_);
  y.shl(e - b.exp_);
  return x <=> y;
}

}  // namespace kpc::verifier::trace
