// kube-proxy's test canonicalisation (sortIPTablesRules in proxier_test.go),
// reimplemented from its description in fixtures/KUBEPROXY_TESTS.md: kube-proxy
// emits services in Go map order, so its tests compare after this sort. kpc is
// compared with kube-proxy's expected dumps the same way. Text in, text out;
// deliberately independent of kpc's own parser.
#pragma once

#include <string>
#include <vector>

namespace kpc::test {

std::string sort_iptables_rules(const std::string& restore_text);

/// Structural checks kube-proxy's tests run (checkIPTablesRuleJumps, simplified):
/// returns a list of problems (empty = consistent): a chain declared twice in a
/// table, a -j/-g to a chain not declared in the same table, -X of an undeclared chain.
std::vector<std::string> check_restore_consistency(const std::string& restore_text);

/// The rules ("-A CHAIN ...") of one chain of one table, in order.
std::vector<std::string> chain_rules(const std::string& restore_text, const std::string& table, const std::string& chain);

}  // namespace kpc::test
