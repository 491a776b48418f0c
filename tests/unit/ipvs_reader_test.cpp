// The verifier's reader of the node's IPVS table (verifier/ipvs, issue 17 §2): `ipvsadm -S -n`
// output, `ipvsadm -R` change scripts with ipvsadm's and the kernel's semantics, and the
// `ipvsadm -Ln` connection counts; bad input is refused with its line.
#include <gtest/gtest.h>

#include "verifier/ipvs/ipvsadm.h"

namespace kpc::verifier::ipvs {
namespace {

HostPort hp(const char* s) { return *parse_host_port(s); }

const VirtualServer& service(const Table& t, Proto p, const char* vip) { return t.services.at({p, hp(vip)}); }

std::string save_error(std::string_view text) {
  Table t;
  std::string e;
  EXPECT_FALSE(parse_save(text, &t, &e)) << text;
  return e;
}

TEST(IpvsReader, ReadsSaveOutput) {
  Table t;
  std::string e;
  ASSERT_TRUE(parse_save("-A -t 10.96.0.10:53 -s rr\n"
                         "-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
                         "-a -t 10.96.0.10:53 -r 10.244.2.2:53 -m -w 0\n"
                         "\n"
                         "-A -u 10.96.0.10:53 -s mh -p 10800 -b mh-port\n"
                         "-A --sctp-service [fd00::1]:9 -s wrr -p\n"
                         "-a --sctp-service [fd00::1]:9 -r [fd00::2]:90 -g -w 3\n",
                         &t, &e))
      << e;
  ASSERT_EQ(t.services.size(), 3u);
  const auto& tcp = service(t, Proto::TCP, "10.96.0.10:53");
  EXPECT_EQ(tcp.scheduler, "rr");
  EXPECT_FALSE(tcp.persistent);
  ASSERT_EQ(tcp.real_servers.size(), 2u);
  EXPECT_EQ(tcp.real_servers[1].weight, 0u);
  EXPECT_EQ(tcp.real_servers[1].forward, Forward::Masq);
  EXPECT_FALSE(tcp.real_servers[0].connections());  // counts not read
  const auto& udp = service(t, Proto::UDP, "10.96.0.10:53");
  EXPECT_TRUE(udp.persistent);
  EXPECT_EQ(udp.timeout, 10800u);
  EXPECT_EQ(udp.flags, "mh-port");
  const auto& sctp = service(t, Proto::SCTP, "[fd00::1]:9");
  EXPECT_EQ(sctp.timeout, 300u);  // ipvsadm's default persistence
  EXPECT_EQ(sctp.real_servers[0].forward, Forward::Gate);
  EXPECT_EQ(sctp.real_servers[0].weight, 3u);
  EXPECT_EQ(t.real_server_count(), 3u);
}

TEST(IpvsReader, RefusesBadSaveOutputWithItsLine) {
  const std::string ok = "-A -t 10.0.0.1:80 -s rr\n";
  EXPECT_EQ(save_error(ok + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w x\n"), "2: not a weight (0-65535): x");
  EXPECT_EQ(save_error(ok + "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 65536\n"), "2: not a weight (0-65535): 65536");
  EXPECT_EQ(save_error("-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n"), "1: no such virtual service");
  EXPECT_EQ(save_error(ok + ok), "2: virtual service already exists");
  EXPECT_EQ(save_error(ok + "-E -t 10.0.0.1:80 -s wrr\n"), "2: ipvsadm -S writes only -A and -a lines");
  EXPECT_EQ(save_error(ok + "-A -f 1 -s rr\n"), "2: fwmark services are not modelled (kube-proxy makes none)");
  EXPECT_EQ(save_error("-A -t 10.0.0.1 -s rr\n"), "1: not an address:port: 10.0.0.1");
  EXPECT_EQ(save_error("-A -t [fd00::1:80 -s rr\n"), "1: not an address:port: [fd00::1:80");
  EXPECT_EQ(save_error("-A -t 10.0.0.1:80 -s\n"), "1: option -s needs an argument");
  EXPECT_EQ(save_error("-A -t 10.0.0.1:80 -s r;r\n"), "1: not a scheduler name: r;r");
  EXPECT_EQ(save_error("-A -t 10.0.0.1:80 -s rr -s rr\n"), "1: option -s given twice");
  EXPECT_EQ(save_error("-A -s rr\n"), "1: no virtual service (-t, -u or --sctp-service)");
  EXPECT_EQ(save_error(ok + "-a -t 10.0.0.1:80 -m\n"), "2: no real server (-r)");
  EXPECT_EQ(save_error(ok + "-a -t 10.0.0.1:80 -r [fd00::1]:80\n"),
            "2: real server and virtual service of different families");
  EXPECT_EQ(save_error("ipvsadm -A -t 10.0.0.1:80\n"), "1: not an ipvsadm command: ipvsadm");
  EXPECT_EQ(save_error(ok + "-A -t 10.0.0.2:80 -s rr --pe sip\n"), "2: option not modelled: --pe");
  EXPECT_EQ(save_error(std::string("-A -t 10.0.0.1:80 -s rr\0\n", 25)), "1: NUL byte in the line");
  EXPECT_EQ(save_error("-A -t 10.0.0.1:80 -s rr -p 0\n"), "1: not a persistence timeout: 0");
}

TEST(IpvsReader, AppliesChangeScriptsAsIpvsadm) {
  Table t;
  std::string e;
  ASSERT_TRUE(parse_save("-A -t 10.0.0.1:80 -s wrr -p 60\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n"
                         "-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1\n-A -u 10.0.0.1:53 -s rr\n",
                         &t, &e));
  ASSERT_TRUE(apply_script("-E -t 10.0.0.1:80 -s rr\n"            // persistence dropped: -E resets
                           "-e -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 0\n"
                           "-d -t 10.0.0.1:80 -r 10.1.0.2:80\n"
                           "-a -t 10.0.0.1:80 -r 10.1.0.3:80 -m -w 1\n"
                           "-D -u 10.0.0.1:53\n",
                           &t, &e))
      << e;
  const auto& vs = service(t, Proto::TCP, "10.0.0.1:80");
  EXPECT_EQ(vs.scheduler, "rr");
  EXPECT_FALSE(vs.persistent);
  ASSERT_EQ(vs.real_servers.size(), 2u);
  EXPECT_EQ(vs.real_servers[0].weight, 0u);
  EXPECT_EQ(vs.real_servers[1].dest, hp("10.1.0.3:80"));
  EXPECT_EQ(t.services.size(), 1u);
  // What the kernel refuses: a missing destination, a second add, a missing service.
  Table before = t;
  EXPECT_FALSE(apply_script("-d -t 10.0.0.1:80 -r 10.1.0.2:80\n", &t, &e));
  EXPECT_EQ(e, "1: no such destination");
  EXPECT_FALSE(apply_script("\n-a -t 10.0.0.1:80 -r 10.1.0.3:80 -m -w 1\n", &t, &e));
  EXPECT_EQ(e, "2: destination already exists");
  EXPECT_FALSE(apply_script("-E -u 10.0.0.1:53 -s rr\n", &t, &e));
  EXPECT_EQ(e, "1: no such virtual service");
  EXPECT_FALSE(apply_script("-d -t 10.0.0.1:80 -r 10.1.0.3:80 -w 1\n", &t, &e));
  EXPECT_EQ(e, "1: option not allowed with -d");
  ASSERT_TRUE(apply_script("-C\n", &t, &e));
  EXPECT_TRUE(t.services.empty());
}

const char* kSave =
    "-A -t 10.96.0.10:53 -s rr\n"
    "-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
    "-a -t 10.96.0.10:53 -r 10.244.2.2:53 -m -w 0\n"
    "-A -u [fd00::10]:53 -s rr\n"
    "-a -u [fd00::10]:53 -r [fd00::2]:53 -m -w 1\n";

TEST(IpvsReader, ReadsConnectionCounts) {
  Table t;
  std::string e;
  ASSERT_TRUE(parse_save(kSave, &t, &e));
  ASSERT_TRUE(read_counts("IP Virtual Server version 1.2.1 (size=4096)\n"
                          "Prot LocalAddress:Port Scheduler Flags\n"
                          "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
                          "TCP  10.96.0.10:53 rr\n"
                          "  -> 10.244.1.2:53                Masq    1      0          0\n"
                          "  -> 10.244.2.2:53                Masq    0      3          4\n"
                          "UDP  [fd00::10]:53 rr\n"
                          "  -> [fd00::2]:53                 Masq    1      0          9\n",
                          &t, &e))
      << e;
  const auto& tcp = service(t, Proto::TCP, "10.96.0.10:53");
  EXPECT_EQ(tcp.real_servers[0].connections(), 0u);
  EXPECT_EQ(tcp.real_servers[1].connections(), 7u);  // ActiveConn + InActConn, as kube-proxy adds them
  EXPECT_EQ(service(t, Proto::UDP, "[fd00::10]:53").real_servers[0].connections(), 9u);
}

TEST(IpvsReader, RefusesBadCountsWithTheirLine) {
  auto err = [](std::string_view text) {
    Table t;
    std::string e;
    EXPECT_TRUE(parse_save(kSave, &t, &e));
    EXPECT_FALSE(read_counts(text, &t, &e)) << text;
    return e;
  };
  EXPECT_EQ(err("  -> 10.244.1.2:53 Masq 1 0 0\n"), "1: a real server before any virtual service");
  EXPECT_EQ(err("TCP  10.96.0.10:53 rr\n  -> 10.244.1.2:53 Masq 1 0\n"),
            "2: expected: -> ADDRESS:PORT FORWARD WEIGHT ACTIVECONN INACTCONN");
  EXPECT_EQ(err("TCP  10.96.0.10:53 rr\n  -> 10.244.1.2:53 Masq 1 -1 0\n"),
            "2: expected: -> ADDRESS:PORT FORWARD WEIGHT ACTIVECONN INACTCONN (numbers)");
  EXPECT_EQ(err("TCP  10.96.0.11:53 rr\n"), "1: virtual service TCP 10.96.0.11:53 is not in the saved table (ipvs.save)");
  EXPECT_EQ(err("TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 0 0\n"),
            "2: real server 10.244.9.9:53 is not in the saved table (ipvs.save)");
  EXPECT_EQ(err("FWM  1 rr\n"), "1: fwmark services are not modelled (kube-proxy makes none)");
  EXPECT_EQ(err("hello\n"),
            "1: expected a virtual service line (TCP|UDP|SCTP ADDRESS:PORT SCHEDULER ...) or a real server line");
}

// Every prefix and every one-byte change of a valid text is read or refused, never a crash.
TEST(IpvsReader, NoCrashOnMangledInput) {
  std::string text = kSave;
  for (size_t i = 0; i <= text.size(); ++i) {
    Table t;
    std::string e;
    parse_save(text.substr(0, i), &t, &e);
    for (char c : {'\0', ' ', ':', '[', ']', '-', '9', 'x'}) {
      std::string m = text;
      if (i < m.size()) m[i] = c;
      parse_save(m, &t, &e);
      apply_script(m, &t, &e);
      read_counts(m, &t, &e);
    }
  }
}

}  // namespace
}  // namespace kpc::verifier::ipvs
