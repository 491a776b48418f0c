// The nft model refuses what nft refuses, in nft's words, and never applies a statement it does
// not read: each message below is nft 1.0.6's (`nft -f` in a network namespace), byte for byte;
// tests/kernel/nft_model_kernel_test.cpp (NftModelKernel.RefusedAsNftRefuses) compares them with
// the real nft again.
#include <gtest/gtest.h>

#include <string>

#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {
namespace {

const std::string kBase = "add table ip kube-proxy\nadd chain ip kube-proxy services\n";

// The rule added to kBase's chain (line 3): the result.
ApplyResult add(const std::string& rule, const std::string& end = "\n", NftState* state = nullptr) {
  NftState own;
  NftState& s = state ? *state : own;
  return apply_script(s, kBase + "add rule ip kube-proxy services " + rule + end, "x.nft");
}

// nft's refusal: not the model's, rendered as nft prints it.
std::string nft_says(const ApplyResult& r) {
  if (r.ok) return "(taken)";
  if (r.not_modelled()) return "(not modelled) " + r.error->to_string();
  return r.error->render();
}

TEST(NftRefuse, AWordNftDoesNotKnowComparedWithAValue) {
  EXPECT_EQ(nft_says(add("frobnicate 7")),
            "x.nft:3:33-42: Error: No symbol type information\n"
            "add rule ip kube-proxy services frobnicate 7\n"
            "                                ^^^^^^^^^^\n");
  EXPECT_EQ(nft_says(add("foo bar")),
            "x.nft:3:33-35: Error: No symbol type information\n"
            "add rule ip kube-proxy services foo bar\n"
            "                                ^^^\n");
  // after other statements, with an operator, a quoted string, an address, a comment
  EXPECT_EQ(add("ip daddr 10.0.0.1 frobnicate 7").error->to_string(), "x.nft:3:51-60: Error: No symbol type information");
  EXPECT_EQ(add("counter foo 7").error->to_string(), "x.nft:3:41-43: Error: No symbol type information");
  EXPECT_EQ(add("foo != 7").error->to_string(), "x.nft:3:33-35: Error: No symbol type information");
  EXPECT_EQ(add("foo \"bar\"").error->to_string(), "x.nft:3:33-35: Error: No symbol type information");
  EXPECT_EQ(add("foo 10.0.0.1").error->to_string(), "x.nft:3:33-35: Error: No symbol type information");
  EXPECT_EQ(add("foo 7 comment \"x\"").error->to_string(), "x.nft:3:33-35: Error: No symbol type information");
  EXPECT_EQ(add("foo 7 jump nochain").error->to_string(), "x.nft:3:33-35: Error: No symbol type information");
  EXPECT_FALSE(add("foo bar").not_modelled());
}

TEST(NftRefuse, AWordNftDoesNotKnowAloneIsItsSyntaxError) {
  EXPECT_EQ(nft_says(add("foo")),
            "x.nft:3:36-36: Error: syntax error, unexpected newline\n"
            "add rule ip kube-proxy services foo\n"
            "                                   ^\n");
  EXPECT_EQ(add("foo", ";\n").error->to_string(), "x.nft:3:36-36: Error: syntax error, unexpected semicolon");
  EXPECT_EQ(add("foo", "").error->to_string(), "x.nft:3:36-36: Error: syntax error, unexpected end of file");
  EXPECT_EQ(add("ip daddr 10.0.0.1 foo").error->to_string(), "x.nft:3:54-54: Error: syntax error, unexpected newline");
  EXPECT_EQ(add("counter foo").error->to_string(), "x.nft:3:44-44: Error: syntax error, unexpected newline");
  EXPECT_EQ(add("foo 7 bar").error->to_string(), "x.nft:3:42-42: Error: syntax error, unexpected newline");
  EXPECT_EQ(add("foo comment \"x\"").error->to_string(), "x.nft:3:37-43: Error: syntax error, unexpected comment");
  EXPECT_EQ(add("foo accept").error->to_string(), "x.nft:3:37-42: Error: syntax error, unexpected accept");
  // nft's parser refuses the file before evaluating anything: a later syntax error wins over an
  // earlier evaluation error
  NftState s;
  ApplyResult r = apply_script(s, kBase + "add rule ip kube-proxy services foo 7\nadd rule ip kube-proxy services bar\n", "x.nft");
  EXPECT_EQ(r.error->to_string(), "x.nft:4:36-36: Error: syntax error, unexpected newline");
  EXPECT_FALSE(r.not_modelled());
}

TEST(NftRefuse, AFieldNftDoesNotKnow) {
  EXPECT_EQ(nft_says(add("ip frobnicate 7")),
            "x.nft:3:36-45: Error: syntax error, unexpected string\n"
            "add rule ip kube-proxy services ip frobnicate 7\n"
            "                                   ^^^^^^^^^^\n");
  EXPECT_EQ(add("tcp foo 7").error->to_string(), "x.nft:3:37-39: Error: syntax error, unexpected string");
  EXPECT_EQ(add("udp frobnicate 7").error->to_string(),
            "x.nft:3:37-46: Error: syntax error, unexpected string, expecting length or checksum or sport or dport");
  EXPECT_EQ(add("th frobnicate 7").error->to_string(),
            "x.nft:3:36-45: Error: syntax error, unexpected string, expecting sport or dport");
  EXPECT_EQ(add("numgen frobnicate 7").error->to_string(),
            "x.nft:3:40-49: Error: syntax error, unexpected string, expecting random or inc");
  EXPECT_EQ(add("meta frobnicate 7").error->to_string(),
            "x.nft:3:33-47: Error: syntax error, unexpected frobnicate, known keys are length, protocol, priority, "
            "mark, iif, oif, iifname, oifname, iiftype, oiftype, skuid, skgid, nftrace, rtclassid, secmark, nfproto, "
            "l4proto, ibrname, obrname, pkttype, cpu, iifgroup, oifgroup, cgroup, random, ipsec, iifkind, oifkind, "
            "ibrpvid, ibrvproto, time, day, hour, sdif, sdifname");
  // a field nft knows and kpc does not read: not modelled
  EXPECT_TRUE(add("ip ttl 5 accept").not_modelled());
  EXPECT_TRUE(add("meta skuid 0 accept").not_modelled());
}

TEST(NftRefuse, AStatementAfterATerminalOne) {
  EXPECT_EQ(nft_says(add("accept foo 7")),
            "x.nft:3:40-44: Error: Statement after terminal statement has no effect\n"
            "add rule ip kube-proxy services accept foo 7\n"
            "                                ~~~~~~ ^^^^^\n");
  EXPECT_EQ(nft_says(add("ip daddr 10.0.0.1 accept drop")),
            "x.nft:3:58-61: Error: Statement after terminal statement has no effect\n"
            "add rule ip kube-proxy services ip daddr 10.0.0.1 accept drop\n"
            "                                                  ~~~~~~ ^^^^\n");
  // the terminal's and the statement's extents as nft has them
  EXPECT_EQ(nft_says(add("jump services counter")),
            "x.nft:3:47-53: Error: Statement after terminal statement has no effect\n"
            "add rule ip kube-proxy services jump services counter\n"
            "                                ~~~~~~~~~~~~~ ^^^^^^^\n");
  EXPECT_EQ(nft_says(add("drop counter packets 1 bytes 2")),
            "x.nft:3:38-44: Error: Statement after terminal statement has no effect\n"
            "add rule ip kube-proxy services drop counter packets 1 bytes 2\n"
            "                                ~~~~ ^^^^^^^\n");
  EXPECT_EQ(nft_says(add("drop meta mark set 0x4000")),
            "x.nft:3:38-57: Error: Statement after terminal statement has no effect\n"
            "add rule ip kube-proxy services drop meta mark set 0x4000\n"
            "                                ~~~~ ^^^^^^^^^^^^^^^^^^^^\n");
  EXPECT_EQ(add("reject counter").error->to_string(), "x.nft:3:40-46: Error: Statement after terminal statement has no effect");
  EXPECT_EQ(add("masquerade counter").error->to_string(), "x.nft:3:44-50: Error: Statement after terminal statement has no effect");
  EXPECT_EQ(nft_says(add("meta l4proto tcp dnat to 1.2.3.4:80 foo 7")),
            "x.nft:3:69-73: Error: Statement after terminal statement has no effect\n"
            "add rule ip kube-proxy services meta l4proto tcp dnat to 1.2.3.4:80 foo 7\n"
            "                                                 ~~~~               ^^^^^\n");
  // (continue and a verdict map are not terminal to nft: what follows is taken, kpc does not read it)
  EXPECT_TRUE(add("continue counter").not_modelled());
  EXPECT_TRUE(add("ip daddr vmap { 1.2.3.4 : drop } counter").not_modelled());
}

TEST(NftRefuse, StatementsInNftsOrder) {
  // a missing set before the unknown word: nft's evaluation meets it first
  EXPECT_EQ(add("ip daddr @nosuch foo 7").error->to_string(), "x.nft:3:42-48: Error: No such file or directory");
  // the statements before the table: a missing table after the unknown word
  NftState s;
  ApplyResult r = apply_script(s, "add rule ip nosuch services foo 7\n", "x.nft");
  EXPECT_EQ(r.error->to_string(), "x.nft:1:29-31: Error: No symbol type information");
  // and before the chain, which only the kernel checks
  EXPECT_EQ(apply_script(s, kBase + "add rule ip kube-proxy nochain foo 7\n", "x.nft").error->to_string(),
            "x.nft:3:32-34: Error: No symbol type information");
  EXPECT_TRUE(s.tables.empty());
}

TEST(NftRefuse, ValidStatementsKpcDoesNotReadAreNotModelledNeverApplied) {
  for (const char* rule : {"log prefix \"x\"", "limit rate 10/second accept", "ip daddr 10.0.0.1 notrack",
                           "queue num 1", "ct helper set \"ftp\""}) {
    NftState s;
    ASSERT_TRUE(apply_script(s, kBase, "base.nft").ok);
    const std::string before = print_ruleset(s);
    ApplyResult r = add(rule, "\n", &s);
    ASSERT_FALSE(r.ok) << rule;
    EXPECT_TRUE(r.not_modelled()) << rule;
    EXPECT_EQ(r.error->message.rfind("not modelled by kpc: ", 0), 0u) << r.error->message;
    EXPECT_EQ(print_ruleset(s), before) << rule;  // (nothing of the file applied)
  }
  // the statement kpc stopped at, to the end of the rule, is named and marked
  EXPECT_EQ(nft_says(add("ip daddr 10.0.0.1 log prefix \"x\" accept")),
            "(not modelled) x.nft:3:51-71: Error: not modelled by kpc: log prefix \"x\" accept (a statement kpc does "
            "not read)");
}

TEST(NftRefuse, TheRefusalsHoldInListings) {
  NftState s;
  NftError err;
  ASSERT_FALSE(parse_listing("table ip t {\n\tchain c {\n\t\tip daddr 1.2.3.4 frobnicate 7\n\t}\n}\n", "l.nft", &s, &err));
  EXPECT_EQ(err.render(),
            "l.nft:3:20-29: Error: No symbol type information\n"
            "\t\tip daddr 1.2.3.4 frobnicate 7\n"
            "\t\t                 ^^^^^^^^^^\n");
  EXPECT_FALSE(err.not_modelled);
  ASSERT_FALSE(parse_listing("table ip t {\n\tchain c {\n\t\tlog prefix \"x\"\n\t}\n}\n", "l.nft", &s, &err));
  EXPECT_TRUE(err.not_modelled);
}

// `nft list ruleset` cut short, at a line's end or in a line: nft's syntax errors.
TEST(NftRefuse, ATruncatedListing) {
  const std::string listing =
      "table ip kube-proxy {\n"
      "\tset s {\n"
      "\t\ttype ipv4_addr\n"
      "\t\telements = { 10.0.0.1, 10.0.0.2,\n"
      "\t\t\t     10.0.0.3 }\n"
      "\t}\n"
      "\n"
      "\tchain services {\n"
      "\t\tip daddr 1.2.3.4 counter packets 0 bytes 0 jump x\n"
      "\t}\n"
      "\n"
      "\tchain x {\n"
      "\t}\n"
      "}\n";
  NftState s;
  NftError err;
  ASSERT_TRUE(parse_listing(listing, "l.nft", &s, &err)) << err.render();
  // every cut at a line's end: "unexpected end of file" after the last line (printed), or, in a
  // list of elements, "expecting comma or '}'"
  size_t at = 0;
  for (int lines = 1; lines < 14; ++lines) {
    at = listing.find('\n', at) + 1;
    const std::string cut = listing.substr(0, at);
    ASSERT_FALSE(parse_listing(cut, "l.nft", &s, &err)) << cut;
    EXPECT_FALSE(err.not_modelled) << err.render();
    EXPECT_EQ(err.line, lines + 1);
    EXPECT_EQ(err.col_begin, 1);
    const std::string last = cut.substr(cut.rfind('\n', cut.size() - 2) == std::string::npos ? 0 : cut.rfind('\n', cut.size() - 2) + 1);
    EXPECT_EQ(err.source_line + "\n", last) << lines;
    EXPECT_EQ(err.message, lines == 4 ? "syntax error, unexpected end of file, expecting comma or '}'"
                                      : "syntax error, unexpected end of file")
        << lines;
  }
  EXPECT_EQ(err.render(), "l.nft:14:1-1: Error: syntax error, unexpected end of file\n\t}\n^\n");
  // in a line: a word cut short is a word nft does not know; a rule without its line break
  ASSERT_FALSE(parse_listing(listing.substr(0, listing.find("counter") + 4), "l.nft", &s, &err));
  EXPECT_EQ(err.to_string(), "l.nft:9:24-24: Error: syntax error, unexpected end of file");
  ASSERT_FALSE(parse_listing(listing.substr(0, listing.find("jump x") + 6), "l.nft", &s, &err));
  EXPECT_EQ(err.to_string(), "l.nft:9:52-52: Error: syntax error, unexpected end of file, expecting newline or semicolon");
  ASSERT_FALSE(parse_listing(listing.substr(0, listing.find("ip daddr") + 5), "l.nft", &s, &err));
  EXPECT_EQ(err.to_string(), "l.nft:9:6-7: Error: syntax error, unexpected string");
  ASSERT_FALSE(parse_listing("table ip t {\n\tchain x {\n\t}", "l.nft", &s, &err));
  EXPECT_EQ(err.to_string(), "l.nft:3:3-3: Error: syntax error, unexpected end of file, expecting newline or semicolon");
}

TEST(NftRefuse, UnbalancedBlocks) {
  NftState s;
  auto says = [&](const std::string& text) {
    NftState st;
    ApplyResult r = apply_script(st, text, "b.nft");
    return r.ok ? "(taken)" : (r.not_modelled() ? "(not modelled) " : "") + r.error->to_string();
  };
  EXPECT_EQ(says("table ip t {\n}\n}\n"), "b.nft:3:1-1: Error: syntax error, unexpected '}'");
  EXPECT_EQ(says("add table ip t\n}\n"), "b.nft:2:1-1: Error: syntax error, unexpected '}'");
  EXPECT_EQ(says("table ip t {\n}}\n"), "b.nft:2:2-2: Error: syntax error, unexpected '}', expecting end of file or newline or semicolon");
  EXPECT_EQ(says("table ip t {\n\tchain x {\n\t}}\n}\n"),
            "b.nft:3:3-3: Error: syntax error, unexpected '}', expecting newline or semicolon");
  EXPECT_EQ(says("table ip t { chain x { } }\n"), "b.nft:1:26-26: Error: syntax error, unexpected '}', expecting newline or semicolon");
  EXPECT_EQ(says("table ip t {\n\tchain x {\n\t\taccept }\n}\n"),
            "b.nft:3:10-10: Error: syntax error, unexpected '}', expecting newline or semicolon");
  EXPECT_EQ(says("table ip t {\n\tchain x {\n\t\tfoo }\n}\n"), "b.nft:3:7-7: Error: syntax error, unexpected '}'");
  EXPECT_EQ(says("add table ip t\nadd chain ip t x\nadd rule ip t x accept }\n"),
            "b.nft:3:24-24: Error: syntax error, unexpected '}', expecting end of file or newline or semicolon");
  EXPECT_EQ(says("add table ip t\nadd chain ip t x {\n"), "b.nft:3:1-1: Error: syntax error, unexpected end of file");
  // (balanced, with the line breaks nft wants: taken)
  EXPECT_EQ(says("table ip t {\n\tchain x {\n\t\taccept\n\t}\n}\n"), "(taken)");
  EXPECT_EQ(says("table ip t { chain x { accept ; } ; }\n"), "(taken)");
}

}  // namespace
}  // namespace kpc::verifier::nft
