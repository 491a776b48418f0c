#include "tests/support/kube_api_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/support/test_util.h"

namespace kpc::test {

namespace {

std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

bool openssl(const std::vector<std::string>& args, std::string* error) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run(argv);
  if (r.exit_code != 0) *error = "openssl " + args[0] + ": " + r.err;
  return r.exit_code == 0;
}

// A key and a certificate signed by the CA, with subjectAltNames.
bool issue(const TestPki& p, const std::string& name, const std::string& cn, const std::string& ext,
           std::string* error) {
  std::string key = p.dir + "/" + name + ".key", csr = p.dir + "/" + name + ".csr", crt = p.dir + "/" + name + ".crt";
  std::string extfile = p.dir + "/" + name + ".ext";
  write_file(extfile, ext);
  return openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
                  csr, "-subj", "/CN=" + cn},
                 error) &&
         openssl({"x509", "-req", "-in", csr, "-CA", p.ca_crt, "-CAkey", p.dir + "/ca.key", "-CAcreateserial", "-out",
                  crt, "-days", "3", "-extfile", extfile},
                 error);
}

}  // namespace

const TestPki& test_pki() {
  static TestPki p = [] {
    TestPki x;
    x.dir = temp_dir("kube-pki");
    x.ca_crt = x.dir + "/ca.crt";
    x.server_crt = x.dir + "/server.crt", x.server_key = x.dir + "/server.key";
    x.client_crt = x.dir + "/client.crt", x.client_key = x.dir + "/client.key";
    x.ok = openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    x.dir + "/ca.key", "-out", x.ca_crt, "-subj", "/CN=kpc-test-ca", "-days", "3"},
                   &x.error) &&
           issue(x, "server", "127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
                 &x.error) &&
           issue(x, "client", "system:kube-proxy", "extendedKeyUsage=clientAuth\n", &x.error);
    return x;
  }();
  return p;
}

bool can_run_kube_api_server() {
  return run({"python3", "-c", "import yaml, ssl"}).exit_code == 0 && run({"openssl", "version"}).exit_code == 0;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) stop(2000);
}

bool ChildProcess::start(const std::vector<std::string>& argv, const std::string& stderr_file) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) return false;  // no other thread's child may inherit them
  pid_ = fork();
  if (pid_ == 0) {
    int err = open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in[0], 0), dup2(out[1], 1);
    if (err >= 0) dup2(err, 2);
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(in[0]), close(out[1]);
  in_ = in[1], out_ = out[0];
  return pid_ > 0;
}

bool ChildProcess::read_line(std::string* line, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
      *line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char b[4096];
    ssize_t n = read(out_, b, sizeof b);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
  }
}

bool ChildProcess::write_all(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(in_, text.data() + done, text.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

int ChildProcess::stop(int timeout_ms) {
  if (pid_ <= 0) return -1;
  if (in_ >= 0) close(in_), in_ = -1;
  kill(pid_, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (out_ >= 0) close(out_), out_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool KubeApiServer::start(const KubeApiServerOptions& o) {
  const TestPki& pki = test_pki();
  if (!pki.ok) return error_ = "PKI: " + pki.error, false;
  std::vector<std::string> argv;
  if (!o.netns.empty()) argv = {"ip", "netns", "exec", o.netns};
  for (auto a : {"python3", "-u"}) argv.push_back(a);
  argv.push_back(source_path("tests/support/kube_api_server.py"));
  for (auto a : {"--cert", pki.server_crt.c_str(), "--key", pki.server_key.c_str()}) argv.push_back(a);
  if (!o.token.empty()) argv.push_back("--token"), argv.push_back(o.token);
  if (o.require_client_cert) argv.push_back("--client-ca"), argv.push_back(pki.ca_crt);
  for (const auto& f : o.objects) argv.push_back("--objects"), argv.push_back(f);
  for (const auto& p : o.not_served) argv.push_back("--not-served"), argv.push_back(p);
  stderr_file_ = temp_dir("kube-api-server") + "/stderr";
  if (!proc_.start(argv, stderr_file_)) return error_ = "cannot start python3", false;
  std::string line;
  if (!proc_.read_line(&line, 20'000) || line.rfind("PORT ", 0) != 0)
    return error_ = "the server did not start: " + line + " " + stderr_text(), false;
  port_ = std::stoi(line.substr(5));
  return true;
}

KubeApiServer::~KubeApiServer() {
  if (port_) proc_.write_all("{\"op\":\"quit\"}\n");
  proc_.stop(3000);
}

nlohmann::json KubeApiServer::command(const nlohmann::json& given) {
  // command({{"op", "drop"}}) arrives as the array ["op", "drop"] (a one-element braced list
  // copy-initialises the json from its element): take it for the object it was meant to be.
  nlohmann::json c = given;
  if (c.is_array() && c.size() == 2 && c[0].is_string()) c = nlohmann::json::object({{c[0].get<std::string>(), c[1]}});
  std::string line;
  if (!proc_.write_all(c.dump() + "\n") || !proc_.read_line(&line, 20'000))
    return {{"ok", false}, {"error", "no reply from the server: " + stderr_text()}};
  return nlohmann::json::parse(line, nullptr, false);
}

std::string KubeApiServer::stderr_text() const {
  std::string s = stderr_file_.empty() ? "" : read_file(stderr_file_);
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

std::string write_kubeconfig(const std::string& dir, const std::string& server_url, KubeconfigAuth auth,
                             const std::string& token) {
  const TestPki& p = test_pki();
  std::string cluster = "    server: " + server_url + "\n";
  std::string user;
  switch (auth) {
    case KubeconfigAuth::Token:
      cluster += "    certificate-authority: " + p.ca_crt + "\n";
      user = "    token: " + token + "\n";
      break;
    case KubeconfigAuth::ClientCertFiles:
      cluster += "    certificate-authority: " + p.ca_crt + "\n";
      user = "    client-certificate: " + p.client_crt + "\n    client-key: " + p.client_key + "\n";
      break;
    case KubeconfigAuth::ClientCertInline:
      cluster += "    certificate-authority-data: " + base64(read_file(p.ca_crt)) + "\n";
      user = "    client-certificate-data: " + base64(read_file(p.client_crt)) + "\n    client-key-data: " +
             base64(read_file(p.client_key)) + "\n";
      break;
    case KubeconfigAuth::None:
      cluster += "    certificate-authority: " + p.ca_crt + "\n";
      user = "    {}\n";
      break;
  }
  if (!token.empty() && auth != KubeconfigAuth::Token) user += "    token: " + token + "\n";
  std::string text = "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                     "contexts:\n- name: other\n  context:\n    cluster: nowhere\n    user: nobody\n"
                     "- name: test\n  context:\n    cluster: local\n    user: kube-proxy\n"
                     "clusters:\n- name: local\n  cluster:\n" + cluster +
                     "users:\n- name: kube-proxy\n  user:\n" + user;
  std::string path = dir + "/kubeconfig";
  write_file(path, text);
  return path;
}

}  // namespace kpc::test
