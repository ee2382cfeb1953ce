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

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  // Keys seen in each object being parsed, innermost last.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  const nlohmann::json::parser_callback_t track = [&](int, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& value) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && duplicate.empty() &&
        !keys.back().insert(value.get<std::string>()).second)
      duplicate = value.get<std::string>();
    return true;
  };
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(text, track);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(str(path, ": malformed JSON: ", e.what()));
  }
  CANZONA_REQUIRE(duplicate.empty(), path, ": duplicate key '", duplicate, "' in one object");
  return parsed;
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
