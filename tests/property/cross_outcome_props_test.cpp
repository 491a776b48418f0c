// The cross diff's hot-path shortcuts are exact (issue 16 §5, session 11's speed work):
// compare_keys orders outcomes exactly as their built keys compare, and Fraction's ordering and
// denominator (shift for the power of two, no products for equal denominators) agree with the
// plain definitions.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "verifier/cross/outcome.h"

namespace kpc::verifier::cross {
namespace {

// Short strings over an alphabet that includes the key's separator and bytes around it, so
// that field boundaries and the separator itself are exercised.
rc::Gen<std::string> field() {
  return rc::gen::container<std::string>(rc::gen::element('a', 'b', '|', '{', '0', ' ', ':', '\x01', '\xff'));
}

rc::Gen<Outcome> outcome() {
  return rc::gen::apply(
      [](int v, std::string route, std::string dnat, bool masq, std::string snat, uint32_t mark, bool aff,
         std::string options) {
        Outcome o;
        o.verdict = static_cast<Verdict>(v);
        o.route = std::move(route);
        o.dnat = std::move(dnat);
        o.masquerade = masq;
        o.snat = std::move(snat);
        o.mark = mark;
        o.affinity = aff;
        o.options = std::move(options);
        return o;
      },
      rc::gen::inRange(0, 4), field(), field(), rc::gen::arbitrary<bool>(), field(),
      rc::gen::element<uint32_t>(0, 1, 0x4000, 0xf, 0x10, 0xffffffff), rc::gen::arbitrary<bool>(), field());
}

int sign(int c) { return (c > 0) - (c < 0); }

RC_GTEST_PROP(CrossOutcomeProps, CompareKeysIsTheBuiltKeysOrder, ()) {
  const Outcome a = *outcome();
  // Half the time b shares a prefix of a's fields, so that equal and nearly equal keys occur.
  Outcome b = *outcome();
  if (*rc::gen::arbitrary<bool>()) {
    b.verdict = a.verdict;
    b.route = a.route;
    if (*rc::gen::arbitrary<bool>()) b.dnat = a.dnat, b.masquerade = a.masquerade, b.snat = a.snat;
  }
  RC_ASSERT(sign(compare_keys(a, b)) == sign(a.key().compare(b.key())));
  RC_ASSERT(compare_keys(a, a) == 0);
}

Fraction product_of(const std::vector<uint32_t>& moduli) {
  Fraction f = Fraction::one();
  for (uint32_t m : moduli) f = f * Fraction::reciprocal(m);
  return f;
}

// The denominator as the product of its prime factors, one multiplication at a time.
trace::BigUInt plain_denominator(const Fraction& f) {
  trace::BigUInt d(1);
  for (const auto& [p, e] : f.denominator_factors())
    for (uint32_t i = 0; i < e; ++i) d = d * trace::BigUInt(p);
  return d;
}

RC_GTEST_PROP(CrossOutcomeProps, FractionOrderAndDenominatorAreThePlainOnes, ()) {
  auto gen_moduli =
      rc::gen::container<std::vector<uint32_t>>(rc::gen::element<uint32_t>(1, 2, 3, 4, 6, 10, 12, 64, 97, 1u << 31));
  const auto ma = *gen_moduli;
  const auto mb = *rc::gen::oneOf(rc::gen::just(ma), gen_moduli);  // often the same denominator
  Fraction a = product_of(ma), b = product_of(mb);
  // Numerators other than 1: sums of shares.
  for (int k = *rc::gen::inRange(0, 3); k > 0; --k) a = a + product_of(ma);
  for (int k = *rc::gen::inRange(0, 3); k > 0; --k) b = b + product_of(mb);
  RC_ASSERT(a.denominator() == plain_denominator(a));
  RC_ASSERT(b.denominator() == plain_denominator(b));
  const auto plain = a.numerator() * plain_denominator(b) <=> b.numerator() * plain_denominator(a);
  RC_ASSERT((a <=> b) == plain);
  RC_ASSERT((a == b) == (plain == 0));
}

}  // namespace
}  // namespace kpc::verifier::cross
