// The safetensors file format (https://huggingface.co/docs/safetensors): what Hugging Face models
// and our checkpoints (checkpoint.h) are stored in. No MPI, no libtorch.
//
// A file is: 8 bytes little-endian u64 N; N bytes of UTF-8 JSON header {"<tensor>": {"dtype":
// "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}, padded
// with spaces; then the data section, each tensor's row-major little-endian bytes at
// [8 + N + begin, 8 + N + end). Tensors tile the data section without gaps or overlap.
//
// Errors. Everything read is validated before a byte of tensor data is used: a file shorter than
// its header or data section (truncated), a header that is not JSON or not the schema above
// (garbled), an unknown dtype, a shape whose byte size differs from its offsets, offsets that
// overlap, leave gaps or run past the file. Each is a UsageError of one line that names the file
// and, where there is one, the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace canzona::ckpt {

// Largest header we accept (HF caps it at 100 MB too).
inline constexpr std::int64_t kMaxHeaderBytes = 100'000'000;

enum class Dtype { kF32, kF16, kBF16, kF64 };
const char* to_string(Dtype dtype);  // "F32", "F16", "BF16", "F64"
std::size_t dtype_bytes(Dtype dtype);

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<std::int64_t> shape;  // empty: a scalar
  std::int64_t begin = 0, end = 0;  // byte offsets in the data section
  std::int64_t numel() const;       // product of shape (1 for a scalar)
};

struct Header {
  std::vector<TensorEntry> tensors;  // in data order (ascending begin)
  std::map<std::string, std::string> metadata;
  std::int64_t data_offset = 0;  // 8 + N: file offset of the data section
  std::int64_t file_bytes = 0;   // data_offset + data section bytes
  // The entry called `name`, or nullptr.
  const TensorEntry* find(const std::string& name) const;
};

// A file to write: F32 tensors laid out contiguously in the given order, the header JSON padded
// with spaces so the data section starts at a multiple of 8. `bytes` is the 8-byte length
// prefix plus the header; header.file_bytes is the size of the whole file. Deterministic: the
// same tensors and metadata give the same bytes. Throws UsageError on a duplicate or empty name.
struct Layout {
  std::string bytes;
  Header header;
};
// layout() is the same with every tensor of `dtype` (F32 or BF16: a bf16 run's model file).
Layout layout(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors,
              Dtype dtype, const std::map<std::string, std::string>& metadata = {});
Layout layout_f32(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors,
                  const std::map<std::string, std::string>& metadata = {});

// Reads and validates the header of the file at `path` (see Errors above), including that the
// file is exactly header.file_bytes long.
Header read_header(const std::string& path);

// Reads elements [first, first + out.size()) of `tensor` (row-major) from the file at `path`,
// converting F16 / BF16 / F64 to float (F16 and BF16 exactly; F64 rounded to nearest). Throws
// UsageError naming the file and tensor when the range lies outside the tensor or the read comes
// up short.
void read_f32(const std::string& path, const Header& header, const TensorEntry& tensor,
              std::int64_t first, std::span<float> out);

// A Hugging Face weights directory: `model.safetensors`, or a sharded
// `model.safetensors.index.json` ({"weight_map": {"<tensor>": "<file>"}}) and its files. Every
// named file's header is read and validated when the directory is opened; a tensor listed in the
// index but missing from its file, a tensor in two files, or a file name with a path separator is
// a UsageError naming the index and the tensor.
class WeightsDir {
 public:
  explicit WeightsDir(const std::string& dir);
  // The tensor called `name` and the file holding it; nullptr when absent.
  struct Found {
    const std::string* path;
    const Header* header;
    const TensorEntry* tensor;
  };
  bool has(const std::string& name) const;
  Found find(const std::string& name) const;  // throws UsageError naming dir and tensor if absent
  std::vector<std::string> names() const;     // sorted
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::pair<std::string, Header>> files_;                 // path, header
  std::map<std::string, std::pair<std::size_t, std::size_t>> index_;  // name -> file, tensor
};

}  // namespace canzona::ckpt
