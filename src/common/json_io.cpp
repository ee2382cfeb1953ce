#include "canzona/common/json_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "canzona/common/error.h"

namespace canzona {
namespace {

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_text_file(const std::string& path) {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  CANZONA_REQUIRE(file.fd >= 0, path, ": cannot read file");
  struct stat st {};
  CANZONA_REQUIRE(::fstat(file.fd, &st) == 0, path, ": cannot read file");
  CANZONA_REQUIRE(S_ISREG(st.st_mode), path, ": not a regular file");
  CANZONA_REQUIRE(st.st_size <= kMaxInputBytes, path, ": ", st.st_size,
                  " bytes exceeds the 64 MiB limit for input files");
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(file.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    CANZONA_REQUIRE(n >= 0, path, ": read failed: ", std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    CANZONA_REQUIRE(std::ssize(text) <= kMaxInputBytes, path,
                    ": exceeds the 64 MiB limit for input files");
  }
  return text;
}

namespace {

// nlohmann's DOM builder behind a SAX interface that also records the first key repeated inside
// one object. Linear in the input (nlohmann's callback parser rescans parents on every object end,
// which is quadratic for a param list with a million entries).
class StrictSax {
 public:
  using json = nlohmann::json;
  explicit StrictSax(json& result) : dom_(result, /*allow_exceptions=*/true) {}

  bool null() { return dom_.null(); }
  bool boolean(bool value) { return dom_.boolean(value); }
  bool number_integer(json::number_integer_t value) { return dom_.number_integer(value); }
  bool number_unsigned(json::number_unsigned_t value) { return dom_.number_unsigned(value); }
  bool number_float(json::number_float_t value, const json::string_t& text) {
    return dom_.number_float(value, text);
  }
  bool string(json::string_t& value) { return dom_.string(value); }
  bool binary(json::binary_t& value) { return dom_.binary(value); }
  bool start_object(std::size_t size) {
    keys_.emplace_back();
    return dom_.start_object(size);
  }
  bool key(json::string_t& name) {
    if (!keys_.empty() && !keys_.back().insert(name).second && duplicate_.empty())
      duplicate_ = name;
    return dom_.key(name);
  }
  bool end_object() {
    if (!keys_.empty()) keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t size) { return dom_.start_array(size); }
  bool end_array() { return dom_.end_array(); }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& error) {
    return dom_.parse_error(position, token, error);
  }

  const std::string& duplicate() const { return duplicate_; }

 private:
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::set<std::string>> keys_;  // keys of each object being parsed, innermost last
  std::string duplicate_;                    // the first repeated key, "" when none
};

}  // namespace

StrictJson parse_json_text(std::string_view text) {
  StrictJson parsed;
  StrictSax sax(parsed.value);
  nlohmann::json::sax_parse(text, &sax);
  parsed.duplicate_key = sax.duplicate();
  return parsed;
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  StrictJson parsed;
  try {
    parsed = parse_json_text(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(str(path, ": malformed JSON: ", e.what()));
  }
  CANZONA_REQUIRE(parsed.duplicate_key.empty(), path, ": duplicate key '", parsed.duplicate_key,
                  "' in one object");
  return std::move(parsed.value);
}

void check_output_path(const std::string& path, std::string_view flag) {
  CANZONA_REQUIRE(!path.empty(), flag, ": empty output path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    CANZONA_REQUIRE(S_ISREG(st.st_mode), flag, " ", path, ": exists and is not a regular file");
  const std::string dir = directory_of(path);
  CANZONA_REQUIRE(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), flag, " ", path,
                  ": directory ", dir, " does not exist");
  CANZONA_REQUIRE(::access(dir.c_str(), W_OK) == 0, flag, " ", path, ": directory ", dir,
                  " is not writable");
}

void write_text_file(const std::string& path, const std::string& text) {
  check_output_path(path, "output");
  const std::string dir = directory_of(path);
  std::string temp =
      (dir == "." && path.find('/') == std::string::npos ? std::string() : dir + "/") +
      ".canzona-XXXXXX";
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  Fd file;
  file.fd = ::mkstemp(name.data());
  CANZONA_REQUIRE(file.fd >= 0, path, ": cannot write file: ", std::strerror(errno));
  temp = name.data();
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw UsageError(str(path, ": ", what, ": ", reason));
  };
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(file.fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed");
    written += static_cast<std::size_t>(n);
  }
  if (::fchmod(file.fd, 0644) != 0 || ::fsync(file.fd) != 0) fail("write failed");
  const int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) fail("write failed");
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("cannot replace file");
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  write_text_file(path, value.dump(2) + "\n");
}

}  // namespace canzona
