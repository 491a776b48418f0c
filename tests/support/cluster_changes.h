// Random changes to a generated cluster (tests/support/snapshot_gen.h), of the kinds
// kube-proxy sees every day: add and delete Services, scale endpoints up and down, to
// zero and back, endpoints that start or stop terminating, port changes, traffic-policy
// flips, session affinity on and off. Shared by the partial-restore property tests
// (real kernel: tests/kernel/partial_restore_props_test.cpp; incremental compiler:
// tests/property/incremental_props_test.cpp).
#pragma once

#include <string>

#include "tests/support/snapshot_gen.h"

namespace kpc::test {

/// One random change; call inside a rapidcheck property (it draws from rc::gen).
/// `serial` makes the names and addresses of added objects unique within a sequence.
void mutate_cluster(testgen::GeneratedCluster& c, int serial);

/// A fresh endpoint address (10.250.0.0/16 or fd00:10:250::/64) for serial number n.
std::string fresh_ip(bool v6, int n);

}  // namespace kpc::test
