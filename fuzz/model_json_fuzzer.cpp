// Fuzz target: the model file readers behind --model FILE. The input bytes are the file; it goes
// through model::load_model (json_io's strict reader, then read_param_list when the object has a
// "params" key, else read_hf_config + build_transformer, then validate). The build options are
// derived from the input size, so every seed stays a plain JSON file: tp = 1, 2, 4, 8 by
// size % 4, --split-qkv none / qkv / head by (size / 4) % 3, --split-fc1 by (size / 12) % 2.
// A model that loads must also survive write_param_list -> read_param_list (the writer promises a
// readable file, load.h) with the same param count, and assign_stages for pp = 1 and 2.
// Seeds: fuzz/corpus/model_json/ (tests/model/data, tests/apps/data).
#include <cstddef>
#include <cstdint>

#include "canzona/model/load.h"
#include "fuzz_common.h"

using namespace canzona;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::scratch_file("model", data, size);
  model::BuildOptions options;
  options.tp = 1 << (size % 4);
  options.qkv_split = static_cast<model::QkvSplit>((size / 4) % 3);
  options.split_fc1 = (size / 12) % 2 == 1;
  fuzz::expect_success_or_usage_error("load_model", [&] {
    const model::ModelSpec spec = model::load_model(path, options);
    if (spec.params.empty()) fuzz::finding("load_model accepted a model without params");
    for (int pp : {1, 2}) {
      fuzz::expect_success_or_usage_error("assign_stages", [&] {
        const std::vector<int> stages = model::assign_stages(spec, pp);
        if (stages.size() != spec.params.size()) fuzz::finding("assign_stages: size mismatch");
        for (int s : stages) {
          if (s < 0 || s >= pp) fuzz::finding("assign_stages: stage outside [0, pp)");
        }
      });
    }
    if (spec.params.size() > 4096) return;  // keep one input fast; the writer is linear
    const std::string copy = path + ".roundtrip.json";
    model::write_param_list(copy, spec);
    try {
      const model::ModelSpec again = model::read_param_list(copy);
      if (again.params.size() != spec.params.size()) {
        fuzz::finding("write_param_list -> read_param_list changed the param count");
      }
    } catch (const std::exception& e) {
      fuzz::finding(std::string("read_param_list rejected write_param_list's output: ") + e.what());
    }
  });
  return 0;
}
