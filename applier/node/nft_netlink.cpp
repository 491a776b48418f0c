#include "applier/node/nft_netlink.h"

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/set.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "applier/node/nft_netlink_encode.h"

namespace kpc::applier {
namespace {

// A NETLINK_NETFILTER socket of the calling thread's network namespace.
class Socket {
 public:
  Socket() {
    nl_ = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (!nl_) return;
    if (mnl_socket_bind(nl_, 0, MNL_SOCKET_AUTOPID) < 0) {
      mnl_socket_close(nl_);
      nl_ = nullptr;
      return;
    }
    // Errors carry only the failing message's header (not a copy of a 64 KiB rule).
    int one = 1;
    mnl_socket_setsockopt(nl_, NETLINK_CAP_ACK, &one, sizeof one);
    portid_ = mnl_socket_get_portid(nl_);
  }
  ~Socket() {
    if (nl_) mnl_socket_close(nl_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  bool ok() const { return nl_ != nullptr; }
  int fd() const { return mnl_socket_get_fd(nl_); }
  uint32_t portid() const { return portid_; }
  mnl_socket* get() const { return nl_; }

 private:
  mnl_socket* nl_ = nullptr;
  uint32_t portid_ = 0;
};

// nft's key type is a chain of 6-bit datatype ids (concat_subtype_add); the kernel keeps it as
// given, so the parts come back out of it.
std::vector<uint32_t> key_parts_of(uint32_t type) {
  std::vector<uint32_t> parts;
  while (type) {
    parts.insert(parts.begin(), type & 0x3f);
    type >>= 6;
  }
  return parts;
}

struct GetSetState {
  uint32_t seq;
  std::optional<nftnl::SetInfo> info;
  int error = 0;
  bool done = false;
};

// GETSET of one set by name: its key, flags, data type and id (what nft's cache would give the
// batch). An error (ENOENT: no such table or set) gives nullopt.
std::optional<nftnl::SetInfo> get_set(const Socket& s, uint8_t family, const std::string& table, const std::string& name,
                                       uint32_t seq) {
  alignas(nlmsghdr) char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSET, family, NLM_F_ACK, seq);
  std::unique_ptr<nftnl_set, void (*)(const nftnl_set*)> q(nftnl_set_alloc(), nftnl_set_free);
  nftnl_set_set_str(q.get(), NFTNL_SET_TABLE, table.c_str());
  nftnl_set_set_str(q.get(), NFTNL_SET_NAME, name.c_str());
  nftnl_set_nlmsg_build_payload(nlh, q.get());
  if (mnl_socket_sendto(s.get(), nlh, nlh->nlmsg_len) < 0) return std::nullopt;
  GetSetState st{seq, std::nullopt};
  while (!st.done) {
    ssize_t n = mnl_socket_recvfrom(s.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    int len = static_cast<int>(n);
    for (auto* m = reinterpret_cast<nlmsghdr*>(buf); mnl_nlmsg_ok(m, len); m = mnl_nlmsg_next(m, &len)) {
      if (m->nlmsg_seq != seq) continue;
      if (m->nlmsg_type == NLMSG_ERROR) {
        st.error = -static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(m))->error;
        st.done = true;
        break;
      }
      if (m->nlmsg_type == ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSET)) {
        std::unique_ptr<nftnl_set, void (*)(const nftnl_set*)> r(nftnl_set_alloc(), nftnl_set_free);
        if (nftnl_set_nlmsg_parse(m, r.get()) < 0) continue;
        nftnl::SetInfo info;
        info.key_parts = key_parts_of(nftnl_set_get_u32(r.get(), NFTNL_SET_KEY_TYPE));
        info.key_len = nftnl_set_get_u32(r.get(), NFTNL_SET_KEY_LEN);
        info.flags = nftnl_set_get_u32(r.get(), NFTNL_SET_FLAGS);
        info.verdict_map = (info.flags & NFT_SET_MAP) && nftnl_set_is_set(r.get(), NFTNL_SET_DATA_TYPE) &&
                           nftnl_set_get_u32(r.get(), NFTNL_SET_DATA_TYPE) == NFT_DATA_VERDICT;
        if ((info.flags & NFT_SET_MAP) && !info.verdict_map) info.key_parts.clear();  // a data map: not kpc's
        if (nftnl_set_is_set(r.get(), NFTNL_SET_ID)) info.id = nftnl_set_get_u32(r.get(), NFTNL_SET_ID);
        st.info = std::move(info);
      }
    }
  }
  if (st.error) return std::nullopt;
  return st.info;
}

NetlinkApplyResult refused(std::string why, int error = 0) {
  NetlinkApplyResult r;
  r.outcome = NetlinkOutcome::Refused;
  r.detail = std::move(why);
  r.error = error;
  return r;
}

}  // namespace

const char* netlink_outcome_name(NetlinkOutcome o) {
  switch (o) {
    case NetlinkOutcome::Applied: return "applied";
    case NetlinkOutcome::Unsupported: return "unsupported";
    case NetlinkOutcome::Refused: return "refused";
  }
  return "?";
}

NetlinkApplyResult nft_netlink_apply(const std::string& program) {
  Socket s;
  if (!s.ok()) {
    // No socket, nothing sent: libnftables may fare no better, but it reports in nft's words.
    NetlinkApplyResult r;
    r.detail = std::string("netlink socket: ") + std::strerror(errno);
    return r;
  }
  uint32_t seq = static_cast<uint32_t>(time(nullptr));
  size_t queries = 0;
  nftnl::SetLookup lookup = [&](uint8_t family, const std::string& table, const std::string& name) {
    ++queries;
    return get_set(s, family, table, name, seq++);
  };
  nftnl::EncodeResult enc = nftnl::encode_program(program, lookup, seq + 1000000);
  NetlinkApplyResult r;
  r.set_queries = queries;
  if (!enc.ok) {
    r.detail = enc.why;
    return r;
  }
  r.messages = enc.batch.messages;
  if (enc.batch.messages == 0) {
    r.outcome = NetlinkOutcome::Applied;  // nft -f of an empty program sends nothing either
    return r;
  }
  auto& bytes = enc.batch.bytes;
  // Acknowledge the last command only: on success the kernel then answers with exactly one
  // message (so the receive queue cannot overflow); on failure it sends the errors, that ack,
  // and for a failed commit one error against the batch's first message.
  size_t last = 0;
  for (size_t off = 0, prev = 0, prev2 = 0; off < bytes.size();) {
    auto* m = reinterpret_cast<nlmsghdr*>(bytes.data() + off);
    prev2 = prev, prev = off;
    off += MNL_ALIGN(m->nlmsg_len);
    if (off >= bytes.size()) last = prev2;
  }
  auto* last_cmd = reinterpret_cast<nlmsghdr*>(bytes.data() + last);
  last_cmd->nlmsg_flags |= NLM_F_ACK;
  const uint32_t ack_seq = last_cmd->nlmsg_seq;

  // The whole batch in one sendmsg: the kernel processes it as one skb, so the send buffer
  // must hold it (nft does the same: SO_SNDBUFFORCE as root).
  int sndbuf = static_cast<int>(std::min<size_t>(bytes.size() + 65536, static_cast<size_t>(INT32_MAX / 2)));
  if (setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
    setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  int rcvbuf = 4 << 20;
  if (setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
    setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  iovec iov{bytes.data(), bytes.size()};
  msghdr msg{};
  msg.msg_name = &kernel;
  msg.msg_namelen = sizeof kernel;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ssize_t sent;
  do sent = sendmsg(s.fd(), &msg, 0);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    // Nothing was processed: a batch the socket cannot take (EMSGSIZE without the privilege to
    // raise the buffer). Not the kernel's verdict on the program: let libnftables try.
    r.outcome = NetlinkOutcome::Unsupported;
    r.detail = std::string("sendmsg: ") + std::strerror(errno);
    return r;
  }

  // The kernel processes the batch inside sendmsg, so every answer is queued by now; poll only
  // guards against a kernel that answers later. Read until the ack of the last command (or a
  // failed commit's error on the batch's first message) and then what is left.
  const uint32_t begin_seq = enc.batch.first_seq;
  bool acked = false, commit_failed = false, lost = false;
  int first_error = 0;
  uint32_t first_error_seq = 0;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = recv(s.fd(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        lost = true;  // answers dropped: only errors are ever that many (success is one ack)
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (acked || commit_failed) break;
        pollfd p{s.fd(), POLLIN, 0};
        if (poll(&p, 1, lost || first_error ? 0 : 30000) <= 0) break;
        continue;
      }
      return refused(std::string("recv: ") + std::strerror(errno), errno);
    }
    int len = static_cast<int>(n);
    for (auto* m = reinterpret_cast<nlmsghdr*>(buf.data()); mnl_nlmsg_ok(m, len); m = mnl_nlmsg_next(m, &len)) {
      if (m->nlmsg_type != NLMSG_ERROR) continue;
      int err = -static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(m))->error;
      // The last command's answer ends the batch's answers, an ack or its own error.
      if (m->nlmsg_seq == ack_seq) acked = true;
      if (err == 0) continue;
      if (m->nlmsg_seq == begin_seq) commit_failed = true;
      if (!first_error) first_error = err, first_error_seq = m->nlmsg_seq;
    }
  }
  auto refusal = [&](std::string why, int error) {
    NetlinkApplyResult f = refused(std::move(why), error);
    f.messages = r.messages;
    f.set_queries = r.set_queries;
    return f;
  };
  if (first_error) {
    uint32_t idx = first_error_seq - begin_seq;
    uint32_t line = idx < enc.batch.line_of.size() ? enc.batch.line_of[idx] : 0;
    return refusal((line ? "line " + std::to_string(line) + ": " : std::string("the batch: ")) + std::strerror(first_error),
                   first_error);
  }
  if (lost) return refusal("the kernel's answers overflowed the socket (ENOBUFS): the batch failed", ENOBUFS);
  if (!acked) return refusal("no acknowledgement from the kernel", 0);
  r.outcome = NetlinkOutcome::Applied;
  return r;
}

}  // namespace kpc::applier
