#include "applier/node/nft_library.h"

#include <nftables/libnftables.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace kpc::applier {
namespace {

struct CtxDeleter {
  void operator()(nft_ctx* c) const { nft_ctx_free(c); }
};
using Ctx = std::unique_ptr<nft_ctx, CtxDeleter>;

// The tool's defaults (`nft` without options): no output flags, no dry run; both streams
// buffered instead of printed on the applier's own stdout/stderr.
Ctx new_context() {
  Ctx c(nft_ctx_new(NFT_CTX_DEFAULT));
  if (!c) return c;
  if (nft_ctx_buffer_output(c.get()) != 0 || nft_ctx_buffer_error(c.get()) != 0) c.reset();
  return c;
}

NftLibResult collect(nft_ctx* c, int rc) {
  NftLibResult r;
  r.exit_code = rc == 0 ? 0 : 1;
  if (const char* o = nft_ctx_get_output_buffer(c)) r.out = o;
  if (const char* e = nft_ctx_get_error_buffer(c)) r.err = e;
  return r;
}

// Every "NAME:" that starts a line of the error text becomes "/dev/stdin:".
std::string rename_input(const std::string& text, const std::string& name) {
  const std::string from = name + ":";
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    if (text.compare(pos, from.size(), from) == 0) {
      out += "/dev/stdin:";
      out.append(text, pos + from.size(), end - pos - from.size());
    } else {
      out.append(text, pos, end - pos);
    }
    pos = end;
  }
  return out;
}

NftLibResult failure(std::string why) {
  NftLibResult r;
  r.exit_code = 1;
  r.err = std::move(why);
  return r;
}

}  // namespace

NftLibResult nft_lib_apply(const std::string& program) {
  // Why a file and not nft_run_cmd_from_buffer: libnftables 1.0.6 prints a buffer's error
  // location without a name and against the wrong line of a multi-line buffer; a file's
  // errors are printed as the tool prints stdin's (line, columns, the line itself, carets).
  // A memfd is that file without touching a disk.
  int fd = memfd_create("kpc-nft", MFD_CLOEXEC);
  if (fd < 0) return failure(std::string("memfd_create: ") + std::strerror(errno) + "\n");
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  for (size_t done = 0; done < program.size();) {
    ssize_t w = write(fd, program.data() + done, program.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return failure(std::string("memfd write: ") + std::strerror(errno) + "\n");
    done += static_cast<size_t>(w);
  }
  Ctx c = new_context();
  if (!c) return failure("nft_ctx_new failed\n");
  const std::string name = "/proc/self/fd/" + std::to_string(fd);
  NftLibResult r = collect(c.get(), nft_run_cmd_from_filename(c.get(), name.c_str()));
  r.err = rename_input(r.err, name);
  return r;
}

NftLibResult nft_lib_command(const std::string& command) {
  Ctx c = new_context();
  if (!c) return failure("nft_ctx_new failed\n");
  return collect(c.get(), nft_run_cmd_from_buffer(c.get(), command.c_str()));
}

}  // namespace kpc::applier
