// Kubernetes name and label rules (k8s.io/apimachinery/pkg/util/validation),
// reimplemented with RE2. Names end up inside rule comments, so these checks
// are what make rule injection through object names impossible: every accepted
// name is from [a-z0-9.-] (labels: [A-Za-z0-9._-]), with no spaces or quotes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kpc {

/// Each returns std::nullopt when valid, else the reason (as the API server words it).
std::optional<std::string> check_dns1123_label(std::string_view s);      ///< namespaces, port names
std::optional<std::string> check_dns1123_subdomain(std::string_view s);  ///< most object names
std::optional<std::string> check_dns1035_label(std::string_view s);      ///< Service names
std::optional<std::string> check_label_key(std::string_view s);          ///< [prefix/]name
std::optional<std::string> check_label_value(std::string_view s);
std::optional<std::string> check_iana_svc_name(std::string_view s);      ///< named targetPorts

}  // namespace kpc
