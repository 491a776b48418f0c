#include "compiler/model/names.h"

#include <re2/re2.h>

#include <memory>
#include <vector>

namespace kpc {
namespace {

const RE2& re(const char* pattern) {
  // Patterns are compile-time constants; each RE2 is built once and shared.
  static thread_local std::vector<std::pair<const char*, std::unique_ptr<RE2>>> cache;
  for (auto& [p, r] : cache)
    if (p == pattern) return *r;
  cache.emplace_back(pattern, std::make_unique<RE2>(pattern));
  return *cache.back().second;
}

constexpr const char* kDns1123Label = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr const char* kDns1123Subdomain = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr const char* kDns1035Label = "[a-z]([-a-z0-9]*[a-z0-9])?";
constexpr const char* kQualifiedName = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr const char* kIanaSvcName = "[-a-z0-9]+";

std::optional<std::string> check(std::string_view s, const char* pattern, size_t max, const char* what,
                                 const char* rule) {
  if (s.empty()) return std::string("must not be empty");
  if (s.size() > max) return std::string("must be no more than ") + std::to_string(max) + " characters";
  if (!RE2::FullMatch(re2::StringPiece(s.data(), s.size()), re(pattern)))
    return std::string("a ") + what + " " + rule;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_dns1123_label(std::string_view s) {
  return check(s, kDns1123Label, 63, "lowercase RFC 1123 label",
               "must consist of lower case alphanumeric characters or '-', and must start and end with an "
               "alphanumeric character");
}

std::optional<std::string> check_dns1123_subdomain(std::string_view s) {
  return check(s, kDns1123Subdomain, 253, "lowercase RFC 1123 subdomain",
               "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
               "alphanumeric character");
}

std::optional<std::string> check_dns1035_label(std::string_view s) {
  return check(s, kDns1035Label, 63, "DNS-1035 label",
               "must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
               "and end with an alphanumeric character");
}

std::optional<std::string> check_label_value(std::string_view s) {
  if (s.empty()) return std::nullopt;
  return check(s, kQualifiedName, 63, "valid label value",
               "must be 63 characters or less and must consist of alphanumeric characters, '-', '_' or '.', "
               "and must start and end with an alphanumeric character");
}

std::optional<std::string> check_label_key(std::string_view s) {
  std::string_view name = s;
  size_t slash = s.find('/');
  if (slash != std::string_view::npos) {
    std::string_view prefix = s.substr(0, slash);
    name = s.substr(slash + 1);
    if (auto err = check_dns1123_subdomain(prefix)) return "prefix part " + *err;
  }
  if (name.empty()) return std::string("name part must not be empty");
  return check(name, kQualifiedName, 63, "qualified name",
               "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
               "alphanumeric character");
}

std::optional<std::string> check_iana_svc_name(std::string_view s) {
  if (s.empty()) return std::string("must not be empty");
  if (s.size() > 15) return std::string("must be no more than 15 characters");
  if (!RE2::FullMatch(re2::StringPiece(s.data(), s.size()), re(kIanaSvcName)))
    return std::string("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
  if (s.find("--") != std::string_view::npos) return std::string("must not contain consecutive hyphens");
  if (s.front() == '-' || s.back() == '-') return std::string("must not begin or end with a hyphen");
  bool letter = false;
  for (char c : s) letter |= (c >= 'a' && c <= 'z');
  if (!letter) return std::string("must contain at least one letter (a-z)");
  return std::nullopt;
}

}  // namespace kpc
