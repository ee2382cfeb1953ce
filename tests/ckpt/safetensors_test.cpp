// The safetensors layer: layout_f32 + OutFile round trips read back bit for bit; F16/BF16/F64
// conversions checked exhaustively against arithmetic definitions; every class of corrupt file
// (truncated anywhere, huge length prefix, garbled header, bad dtype, shape/offset mismatch, gaps,
// overlaps, stray bytes) is a one-line UsageError naming the file and, where there is one, the
// tensor; WeightsDir over single and sharded directories and their inconsistencies.
#include "canzona/ckpt/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/ckpt/file_io.h"
#include "canzona/common/error.h"

namespace canzona::ckpt {
namespace {

namespace fs = std::filesystem;

// The 8-byte little-endian length prefix of `n`.
std::string prefix(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

std::string file_bytes(const std::string& header, const std::string& data) {
  return prefix(header.size()) + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("canzona-st-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::ssize(bytes));
    return path;
  }

  // The message of the UsageError f() throws; fails the test when it throws none or the message
  // is not one line naming `path`.
  template <typename F>
  static std::string usage_error(const std::string& path, F&& f) {
    try {
      f();
    } catch (const UsageError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_EQ(message.rfind(path, 0), 0u) << "'" << message << "' does not start with " << path;
      return message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a UsageError: " << e.what();
      return "";
    }
    ADD_FAILURE() << "no UsageError for " << path;
    return "";
  }

  // Writes `header` + `data` as NAME and expects read_header to fail with a message holding each
  // of `parts`.
  void expect_garbled(const std::string& header, const std::string& data,
                      const std::vector<std::string>& parts) {
    const std::string path = write("bad.safetensors", file_bytes(header, data));
    const std::string message = usage_error(path, [&] { read_header(path); });
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << "'" << message << "' lacks '" << part << "' (header " << header << ")";
  }

  fs::path dir_;
};

// Values whose bits any conversion or byte-order slip would change.
std::vector<float> pattern(std::int64_t n, int k) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] =
        static_cast<float>(std::sin(0.37 * static_cast<double>(i) + k));
  if (n > 0) out[0] = std::bit_cast<float>(0x7fc01234u);  // nan with a payload
  if (n > 1) out[1] = -0.0f;
  if (n > 2) out[2] = std::numeric_limits<float>::denorm_min();
  if (n > 3) out[3] = -std::numeric_limits<float>::infinity();
  return out;
}

TEST_F(Safetensors, LayoutWrittenWithOutFileReadsBackBitForBit) {
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {
      {"layers.0.w", {3, 5}}, {"bias", {7}}, {"scalar", {}}, {"empty", {0, 3}}, {"a.w", {4, 4}}};
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "3"}};
  const Layout layout = layout_f32(tensors, metadata);
  ASSERT_EQ(layout.header.tensors.size(), tensors.size());
  EXPECT_EQ(layout.header.data_offset, std::ssize(layout.bytes));
  EXPECT_EQ(layout.header.data_offset % 8, 0);
  std::uint64_t n = 0;
  std::memcpy(&n, layout.bytes.data(), 8);
  EXPECT_EQ(n + 8, layout.bytes.size());
  // Keys in the given order, then __metadata__; padding is spaces after the JSON.
  const auto parsed = nlohmann::ordered_json::parse(layout.bytes.substr(8));
  std::vector<std::string> keys;
  for (const auto& [key, value] : parsed.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"layers.0.w", "bias", "scalar", "empty", "a.w",
                                            "__metadata__"}));
  EXPECT_EQ(layout.bytes.find_last_not_of(' '), layout.bytes.find_last_of('}'));

  const std::string path = (dir_ / "model.safetensors").string();
  {
    OutFile out(path, /*create=*/true);
    out.allocate(layout.header.file_bytes);
    // Tensors in reverse order, then the header: positioned writes in any order.
    for (int t = static_cast<int>(tensors.size()) - 1; t >= 0; --t) {
      const TensorEntry& e = layout.header.tensors[static_cast<std::size_t>(t)];
      const std::vector<float> values = pattern(e.numel(), t);
      out.pwrite(layout.header.data_offset + e.begin, std::as_bytes(std::span(values)));
    }
    out.pwrite(0, std::as_bytes(std::span(layout.bytes)));
    out.sync();
    out.close();
  }
  EXPECT_EQ(static_cast<std::int64_t>(fs::file_size(path)), layout.header.file_bytes);

  const Header header = read_header(path);
  EXPECT_EQ(header.metadata, metadata);
  EXPECT_EQ(header.data_offset, layout.header.data_offset);
  EXPECT_EQ(header.file_bytes, layout.header.file_bytes);
  ASSERT_EQ(header.tensors.size(), tensors.size());
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const TensorEntry& e = header.tensors[t];
    EXPECT_EQ(e.name, tensors[t].first);  // data order is the given order
    EXPECT_EQ(e.shape, tensors[t].second);
    EXPECT_EQ(e.dtype, Dtype::kF32);
    EXPECT_EQ(e.begin, layout.header.tensors[t].begin);
    EXPECT_EQ(e.end, layout.header.tensors[t].end);
    const std::vector<float> expected = pattern(e.numel(), static_cast<int>(t));
    std::vector<float> got(expected.size(), 1.0f);
    read_f32(path, header, e, 0, got);
    if (!got.empty()) {  // memcmp of a null pointer is undefined even for 0 bytes
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * 4), 0) << e.name;
    }
    // Every sub-range [first, first + count).
    for (std::int64_t first = 0; first <= e.numel(); ++first) {
      std::vector<float> part(static_cast<std::size_t>(e.numel() - first));
      read_f32(path, header, e, first, part);
      if (part.empty()) continue;  // memcmp of a null pointer is undefined even for 0 bytes
      ASSERT_EQ(std::memcmp(part.data(), expected.data() + first, part.size() * 4), 0);
    }
  }
  EXPECT_EQ(header.find("bias"), &header.tensors[1]);
  EXPECT_EQ(header.find("nope"), nullptr);
  EXPECT_EQ(header.find("scalar")->numel(), 1);
  EXPECT_EQ(header.find("empty")->numel(), 0);
}

TEST_F(Safetensors, LayoutIsDeterministicAndOmitsEmptyMetadata) {
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {{"b", {2}},
                                                                                  {"a", {1, 3}}};
  EXPECT_EQ(layout_f32(tensors).bytes, layout_f32(tensors).bytes);
  EXPECT_EQ(layout_f32(tensors).bytes.find("__metadata__"), std::string::npos);
  EXPECT_EQ(layout_f32({}).header.file_bytes, 8 + 8);  // "{}" padded to 8
  EXPECT_THROW(layout_f32({{"a", {1}}, {"a", {2}}}), UsageError);
  EXPECT_THROW(layout_f32({{"", {1}}}), UsageError);
  EXPECT_THROW(layout_f32({{"a", {-1}}}), UsageError);
  EXPECT_THROW(layout_f32({{"a", {1LL << 40, 1LL << 40}}}), UsageError);
}

// float from sign, exponent field and mantissa of a binary16 by arithmetic (not bit moves).
float f16_by_arithmetic(std::uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f)
    return mantissa ? std::numeric_limits<float>::quiet_NaN()
                    : static_cast<float>(sign * std::numeric_limits<double>::infinity());
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));
  return static_cast<float>(sign * std::ldexp(1024 + mantissa, exponent - 25));
}

float bf16_by_arithmetic(std::uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exponent = (h >> 7) & 0xff;
  const int mantissa = h & 0x7f;
  if (exponent == 0xff)
    return mantissa ? std::numeric_limits<float>::quiet_NaN()
                    : static_cast<float>(sign * std::numeric_limits<double>::infinity());
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -133));
  return static_cast<float>(sign * std::ldexp(128 + mantissa, exponent - 134));
}

TEST_F(Safetensors, Half16AndBfloat16ConvertExactlyForAllBitPatterns) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[256,256],"data_offsets":[0,131072]},)"
      R"("b":{"dtype":"BF16","shape":[65536],"data_offsets":[131072,262144]}})";
  const std::string path = write("half.safetensors", file_bytes(header, raw(all) + raw(all)));
  const Header h = read_header(path);
  ASSERT_EQ(h.tensors.size(), 2u);
  std::vector<float> f16(65536), bf16(65536);
  read_f32(path, h, *h.find("h"), 0, f16);
  read_f32(path, h, *h.find("b"), 0, bf16);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const float want16 = f16_by_arithmetic(all[i]);
    const float wantb = bf16_by_arithmetic(all[i]);
    if (std::isnan(want16)) {
      // NaN keeps sign and payload: the binary16 mantissa becomes the top of the float's.
      ASSERT_EQ(std::bit_cast<std::uint32_t>(f16[i]), (std::uint32_t{all[i] & 0x8000u} << 16) |
                                                          0x7f800000u |
                                                          (std::uint32_t{all[i] & 0x3ffu} << 13));
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(f16[i]), std::bit_cast<std::uint32_t>(want16))
          << "F16 0x" << std::hex << all[i];
    }
    if (std::isnan(wantb)) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(bf16[i]), std::uint32_t{all[i]} << 16);
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(bf16[i]), std::bit_cast<std::uint32_t>(wantb))
          << "BF16 0x" << std::hex << all[i];
    }
  }
  // Spot values from the IEEE 754 binary16 definition.
  EXPECT_EQ(f16[0x0001], std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16[0x0400], std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16[0x3c00], 1.0f);
  EXPECT_EQ(f16[0xc000], -2.0f);
  EXPECT_EQ(f16[0x7bff], 65504.0f);
  EXPECT_TRUE(std::signbit(f16[0x8000]) && f16[0x8000] == 0.0f);
  EXPECT_EQ(bf16[0x3f80], 1.0f);
  EXPECT_EQ(f16[0x7c00], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16[0xfc00], -std::numeric_limits<float>::infinity());
}

TEST_F(Safetensors, Float64RoundsToNearestFloat) {
  const std::vector<double> values = {0.1,
                                      1.0 + std::ldexp(1.0, -24),  // tie: to even (1.0)
                                      1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -40),
                                      -3.0,
                                      1e300,
                                      -1e-50,
                                      std::numeric_limits<double>::quiet_NaN()};
  const std::string header = R"({"d":{"dtype":"F64","shape":[7],"data_offsets":[0,56]}})";
  const std::string path = write("f64.safetensors", file_bytes(header, raw(values)));
  const Header h = read_header(path);
  std::vector<float> got(7);
  read_f32(path, h, h.tensors[0], 0, got);
  EXPECT_EQ(got[0], 0.1f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(got[3], -3.0f);
  EXPECT_EQ(got[4], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(got[5] == 0.0f && std::signbit(got[5]));
  EXPECT_TRUE(std::isnan(got[6]));
  std::vector<float> tail(2);
  read_f32(path, h, h.tensors[0], 5, tail);
  EXPECT_TRUE(tail[0] == 0.0f && std::isnan(tail[1]));
}

TEST_F(Safetensors, ReadOutsideTheTensorNamesFileAndTensor) {
  const Layout layout = layout_f32({{"w", {2, 3}}});
  const std::string path = write("m.safetensors", layout.bytes + std::string(24, '\0'));
  const Header h = read_header(path);
  std::vector<float> out(4);
  EXPECT_NE(usage_error(path, [&] { read_f32(path, h, h.tensors[0], 3, out); })
                .find("tensor 'w': elements [3, 7) requested, tensor has 6"),
            std::string::npos);
  EXPECT_NE(usage_error(path, [&] { read_f32(path, h, h.tensors[0], -1, out); }).find("'w'"),
            std::string::npos);
  // The file shrank after its header was read.
  fs::resize_file(path, static_cast<std::uintmax_t>(h.data_offset + 8));
  EXPECT_NE(usage_error(path, [&] { read_f32(path, h, h.tensors[0], 0, out); })
                .find("tensor 'w': truncated"),
            std::string::npos);
}

TEST_F(Safetensors, TruncatedAnywhereIsAUsageErrorNamingTheFile) {
  const Layout layout = layout_f32({{"a", {3}}, {"b", {2, 2}}});
  const std::string whole = layout.bytes + std::string(28, '\x11');
  const std::int64_t n = layout.header.data_offset - 8;
  struct Cut {
    std::int64_t at;
    std::string says;
  };
  const std::vector<Cut> cuts = {
      {0, "truncated: 0-byte file has no 8-byte header length"},
      {3, "truncated: 3-byte file"},
      {7, "truncated: 7-byte file"},
      {8, str("truncated: header needs ", n, " bytes, file has 0")},
      {8 + n / 2, str("truncated: header needs ", n, " bytes, file has ", n / 2)},
      {8 + n - 1, str("truncated: header needs ", n, " bytes, file has ", n - 1)},
      {8 + n, "truncated: data section needs 28 bytes, file has 0"},
      {8 + n + 1, "truncated: data section needs 28 bytes, file has 1"},
      {8 + n + 27, "truncated: data section needs 28 bytes, file has 27"}};
  for (const Cut& cut : cuts) {
    const std::string path = write("cut.safetensors", whole.substr(0, cut.at));
    const std::string message = usage_error(path, [&] { read_header(path); });
    EXPECT_NE(message.find(cut.says), std::string::npos)
        << "cut at " << cut.at << ": '" << message << "'";
  }
  const std::string path = write("long.safetensors", whole + "x");
  EXPECT_NE(usage_error(path, [&] { read_header(path); }).find("1 stray bytes after the data"),
            std::string::npos);
}

TEST_F(Safetensors, HugeLengthPrefixIsRefusedBeforeAnyAllocation) {
  for (std::uint64_t n : {std::uint64_t{1} << 63, ~std::uint64_t{0},
                          static_cast<std::uint64_t>(kMaxHeaderBytes) + 1}) {
    const std::string path = write("huge.safetensors", prefix(n) + "{}      ");
    EXPECT_NE(usage_error(path, [&] { read_header(path); })
                  .find(str("header length ", n, " exceeds the limit of 100000000 bytes")),
              std::string::npos);
  }
  // Within the limit but longer than the file.
  const std::string path = write("long.safetensors", prefix(1000) + "{}      ");
  EXPECT_NE(usage_error(path, [&] { read_header(path); })
                .find("truncated: header needs 1000 bytes, file has 8"),
            std::string::npos);
}

TEST_F(Safetensors, GarbledHeadersNameFileAndTensor) {
  const std::string ok = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  const std::string data(8, '\0');
  expect_garbled("{", data, {"garbled header: not JSON"});
  expect_garbled("", "", {"garbled header: not JSON"});
  expect_garbled(R"({"a":{)" + ok + "}} x", data, {"garbled header: not JSON"});
  expect_garbled("{\"a\xff\":{" + ok + "}}", data, {"garbled header: not JSON"});  // bad UTF-8
  expect_garbled("[1,2]", "", {"garbled header: not a JSON object"});
  expect_garbled(R"({"a":5})", "", {"tensor 'a'", "entry is not an object"});
  expect_garbled(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "missing or non-string dtype"});
  expect_garbled(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "dtype"});
  expect_garbled(R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "unknown dtype 'F8'"});
  expect_garbled(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "unknown dtype 'I64'"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "shape"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "shape holds -2"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", data,
                 {"tensor 'a'", "shape holds 1.5"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[2]}})", data, {"tensor 'a'", "data_offsets"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data,
                 {"tensor 'a'", "data_offsets"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", data,
                 {"tensor 'a'", "not non-negative integers"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data,
                 {"tensor 'a'", "end before they begin"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data,
                 {"tensor 'a'", "unexpected key 'x'"});
  expect_garbled(R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                 std::string(20, '\0'),
                 {"tensor 'x': shape [2, 3] of F32 needs 24 bytes, data_offsets give 20"});
  expect_garbled(R"({"x":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                 data, {"tensor 'x'", "overflows"});
  expect_garbled(R"({"a":{)" + ok + R"(},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 std::string(12, '\0'),
                 {"tensor 'b': data_offsets [4, 12) overlap tensor 'a' [0, 8)"});
  expect_garbled(R"({"a":{)" + ok + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                 std::string(16, '\0'),
                 {"tensor 'b': gap: data_offsets begin at 12, previous tensor 'a' ends at 8"});
  expect_garbled(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 std::string(12, '\0'), {"tensor 'a': gap: data begins at 4"});
  expect_garbled(R"({"a":{)" + ok + R"(},"a":{)" + ok + "}}", data, {"key 'a' appears twice"});
  expect_garbled(R"({"__metadata__":{"k":1}})", "", {"__metadata__ key 'k' is not a string"});
  expect_garbled(R"({"__metadata__":[]})", "", {"__metadata__ is not an object"});
  expect_garbled("{\"bad\\nname\":5}", "", {"tensor 'bad\\x0aname'"});  // stays one line
}

TEST_F(Safetensors, HeaderMayListTensorsOutOfDataOrder) {
  const std::string header = R"({"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("__metadata__":{"format":"pt"},)"
                             R"("a":{"dtype":"BF16","shape":[],"data_offsets":[6,8]},)"
                             R"("m":{"dtype":"F16","shape":[1],"data_offsets":[4,6]},)"
                             R"("e":{"dtype":"F64","shape":[0],"data_offsets":[8,8]}}  )";
  const std::string path = write("order.safetensors", file_bytes(header, std::string(8, '\0')));
  const Header h = read_header(path);
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.tensors[0].name, "z");
  EXPECT_EQ(h.tensors[1].name, "m");
  EXPECT_EQ(h.tensors[2].name, "a");
  EXPECT_EQ(h.tensors[3].name, "e");
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.file_bytes, 8 + std::ssize(header) + 8);
}

// Writes an F32 safetensors file holding `names` (shape [2] each, values 0..).
void write_shard(const std::string& path, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors;
  for (const auto& name : names) tensors.push_back({name, {2}});
  const Layout layout = layout_f32(tensors);
  OutFile out(path, true);
  out.pwrite(0, std::as_bytes(std::span(layout.bytes)));
  std::vector<float> values(2 * names.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  out.pwrite(layout.header.data_offset, std::as_bytes(std::span(values)));
  out.close();
}

TEST_F(Safetensors, WeightsDirReadsSingleAndShardedDirectories) {
  const std::string dir = dir_.string();
  write_shard(dir + "/model.safetensors", {"x", "y"});
  {
    const WeightsDir weights(dir);
    EXPECT_EQ(weights.names(), (std::vector<std::string>{"x", "y"}));
    EXPECT_TRUE(weights.has("y"));
    const auto found = weights.find("y");
    EXPECT_EQ(*found.path, dir + "/model.safetensors");
    std::vector<float> got(2);
    read_f32(*found.path, *found.header, *found.tensor, 0, got);
    EXPECT_EQ(got, (std::vector<float>{2, 3}));
    EXPECT_NE(usage_error(dir, [&] { weights.find("q"); }).find("no tensor 'q'"),
              std::string::npos);
  }
  fs::remove(dir + "/model.safetensors");
  write_shard(dir + "/s1.safetensors", {"b", "a"});
  write_shard(dir + "/s2.safetensors", {"c"});
  write("model.safetensors.index.json",
        R"({"metadata": {"total_size": 24}, "weight_map": {"a": "s1.safetensors",
            "b": "s1.safetensors", "c": "s2.safetensors"}})");
  const WeightsDir weights(dir + "/");
  EXPECT_EQ(weights.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*weights.find("c").path, dir + "/s2.safetensors");
  EXPECT_EQ(weights.find("a").tensor->begin, 8);
  EXPECT_FALSE(weights.has("d"));
}

TEST_F(Safetensors, WeightsDirRefusesInconsistentIndexes) {
  const std::string dir = dir_.string();
  const std::string index = dir + "/model.safetensors.index.json";
  EXPECT_NE(usage_error(dir, [&] { WeightsDir{dir}; })
                .find("no model.safetensors or model.safetensors.index.json"),
            std::string::npos);
  write_shard(dir + "/s1.safetensors", {"a", "b"});
  write_shard(dir + "/s2.safetensors", {"b", "c"});
  struct Case {
    std::string index_json;
    std::string says;
  };
  const std::vector<Case> cases = {
      {R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}})",
       "tensor 'b' is in two files"},
      {R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "z": "s1.safetensors"}})",
       "tensor 'z' is listed for " + dir + "/s1.safetensors but missing from it"},
      {R"({"weight_map": {"a": "s1.safetensors"}})", "tensor 'b' is in"},
      {R"({"weight_map": {"a": "../s1.safetensors"}})", "tensor 'a': file name"},
      {R"({"weight_map": {"a": "/etc/passwd"}})", "tensor 'a': file name"},
      {R"({"weight_map": {"a": 3}})", "tensor 'a'"},
      {R"({"weights": {}})", "missing key 'weight_map'"},
  };
  for (const Case& c : cases) {
    write("model.safetensors.index.json", c.index_json);
    const std::string message = usage_error(index, [&] { WeightsDir{dir}; });
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
  // A plain name that is a symlink out of the directory is refused, naming where it leads.
  const fs::path outside = dir_.parent_path() / ("outside-" + dir_.filename().string());
  write_shard(outside.string(), {"a", "b"});
  fs::create_symlink(outside, dir_ / "s4.safetensors");
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "s4.safetensors", "b": "s4.safetensors"}})");
  const std::string escaped = usage_error(index, [&] { WeightsDir{dir}; });
  fs::remove(outside);
  EXPECT_NE(escaped.find("file 's4.safetensors' resolves to " + outside.string() + ", outside"),
            std::string::npos)
      << escaped;
  // A shard that is itself corrupt is named by its own path.
  write("model.safetensors.index.json", R"({"weight_map": {"a": "s3.safetensors"}})");
  write("s3.safetensors", "abc");
  EXPECT_NE(usage_error(dir + "/s3.safetensors", [&] { WeightsDir{dir}; }).find("truncated"),
            std::string::npos);
}

}  // namespace
}  // namespace canzona::ckpt
