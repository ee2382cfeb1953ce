// A C interface to SentencePiece, built as its own module (libcanzona_spm.so) that data.cpp loads
// with dlopen(RTLD_DEEPBIND). Debian's libsentencepiece carries its own copy of protobuf-lite
// without -Bsymbolic; in a process that also loads libtorch (which links the full libprotobuf),
// the global symbol scope would hand SentencePiece libtorch's protobuf and crash it while it
// registers its descriptors. Loaded with RTLD_DEEPBIND, this module and its dependencies resolve
// their own symbols first.
#include <sentencepiece_processor.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void set_error(const std::string& message, char* error, std::size_t error_size) {
  if (error_size == 0) return;
  std::strncpy(error, message.c_str(), error_size - 1);
  error[error_size - 1] = '\0';
}

}  // namespace

extern "C" {

// A processor loaded from a serialized model, or null with `error` set.
void* canzona_spm_load(const char* model, std::size_t size, char* error, std::size_t error_size) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->LoadFromSerializedProto(std::string(model, size));
  if (!status.ok()) {
    set_error(status.ToString(), error, error_size);
    delete sp;
    return nullptr;
  }
  return sp;
}

std::int64_t canzona_spm_pieces(void* processor) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize();
}

// Encodes `text` one '\n'-separated line at a time (as spm_encode does); *ids is malloc'ed.
int canzona_spm_encode(void* processor, const char* text, std::size_t size, std::int32_t** ids,
                       std::size_t* count, char* error, std::size_t error_size) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(processor);
  std::vector<std::int32_t> out;
  std::vector<int> line_ids;
  for (std::size_t begin = 0; begin < size;) {
    const char* newline = static_cast<const char*>(std::memchr(text + begin, '\n', size - begin));
    const std::size_t end = newline ? static_cast<std::size_t>(newline - text) : size;
    const auto status = sp->Encode(absl::string_view(text + begin, end - begin), &line_ids);
    if (!status.ok()) {
      set_error(status.ToString(), error, error_size);
      return 1;
    }
    out.insert(out.end(), line_ids.begin(), line_ids.end());
    begin = end + 1;
  }
  *count = out.size();
  *ids = static_cast<std::int32_t*>(std::malloc(std::max<std::size_t>(1, out.size()) * 4));
  if (*ids == nullptr) {
    set_error("out of memory", error, error_size);
    return 1;
  }
  if (!out.empty()) std::memcpy(*ids, out.data(), out.size() * sizeof(std::int32_t));
  return 0;
}

void canzona_spm_free_ids(std::int32_t* ids) {
  std::free(ids);
}

void canzona_spm_release(void* processor) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(processor);
}

}  // extern "C"
