// One rank's forward and backward of a preset's training model, timed and then profiled op by op
// with libtorch's autograd profiler (self time per op, the table libtorch's Python profiler
// prints as key_averages). This is how docs/training.md's op breakdown is measured.
//
//   build/bench/train/canzona_model_profile [--model P] [--seq-len S] [--micro-batch B]
//                                           [--trace FILE]
// prints the median fwd-bwd wall time of 5 steps after 2 warm-up steps, then the 20 ops of most
// self time in one more profiled step; --trace also writes that step as a Chrome trace.
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "canzona/model/load.h"
#include "canzona/train/model.h"
#include "canzona/train/trainer.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: canzona_model_profile [--model P] [--seq-len S] [--micro-batch B] "
               "[--trace FILE]\n");
  return 2;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace canzona;
  std::string preset = "qwen3-cpu", trace;
  long seq = 256, batch = 8;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    char* end = nullptr;
    if (a == "--model") {
      preset = argv[i + 1];
    } else if (a == "--trace") {
      trace = argv[i + 1];
    } else if (a == "--seq-len" || a == "--micro-batch") {
      const long v = std::strtol(argv[i + 1], &end, 10);
      if (*end != '\0' || v < 1 || v > 65536) return usage();
      (a == "--seq-len" ? seq : batch) = v;
    } else {
      return usage();
    }
  }
  try {
    torch::set_num_threads(1);
    train::keep_freed_memory();
    const model::TransformerConfig config = model::preset(preset);
    const model::ModelSpec spec = model::build_transformer(config, model::BuildOptions{});
    train::Qwen3Model m(config, spec, train::TpGroup{});
    for (int p = 0; p < m.num_params(); ++p) {
      torch::Tensor& t = m.param(p);
      train::init_param(spec.params[static_cast<std::size_t>(p)], config, 1, 0, 1,
                        {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())});
    }
    torch::manual_seed(1);
    const std::int64_t vocab = config.vocab_size;
    const torch::Tensor inputs = torch::randint(0, vocab, {batch, seq}, torch::kInt64);
    const torch::Tensor targets = torch::randint(0, vocab, {batch, seq}, torch::kInt64);
    const auto step = [&] { m.token_losses(inputs, targets).mean().backward(); };
    for (int i = 0; i < 2; ++i) step();
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
      const double t0 = now_ms();
      step();
      ms.push_back(now_ms() - t0);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s seq %ld micro-batch %ld: fwd-bwd median %.1f ms (min %.1f, max %.1f)\n",
                preset.c_str(), seq, batch, ms[2], ms.front(), ms.back());
    std::stringstream events;
    {
      torch::autograd::profiler::RecordProfile guard(events);
      step();
    }
    if (!trace.empty()) std::ofstream(trace) << events.str();
    // Self time per op from the trace's complete events: an event's duration less its children's.
    struct Event {
      std::string name;
      double ts, dur, child = 0;
    };
    std::vector<Event> list;
    const std::string text = events.str();
    for (std::size_t at = 0; (at = text.find("\"name\": \"", at)) != std::string::npos;) {
      at += 9;
      const std::size_t close = text.find('"', at);
      Event e{text.substr(at, close - at), 0, 0};
      const std::size_t ts = text.find("\"ts\": ", close), dur = text.find("\"dur\": ", close);
      if (ts == std::string::npos || dur == std::string::npos) break;
      e.ts = std::strtod(text.c_str() + ts + 6, nullptr);
      e.dur = std::strtod(text.c_str() + dur + 7, nullptr);
      list.push_back(e);
      at = close;
    }
    std::sort(list.begin(), list.end(), [](const Event& a, const Event& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
    });
    std::vector<Event*> stack;
    for (Event& e : list) {
      while (!stack.empty() && stack.back()->ts + stack.back()->dur <= e.ts) stack.pop_back();
      if (!stack.empty()) stack.back()->child += e.dur;
      stack.push_back(&e);
    }
    std::map<std::string, std::pair<double, int>> self;
    double total = 0;
    for (const Event& e : list) {
      auto& s = self[e.name];
      s.first += e.dur - e.child;
      ++s.second;
      total += e.dur - e.child;
    }
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [name, s] : self) order.push_back({s.first, name});
    std::sort(order.rbegin(), order.rend());
    std::printf("profiled step: %.1f ms of op self time\n", total / 1e3);
    for (std::size_t i = 0; i < std::min<std::size_t>(20, order.size()); ++i)
      std::printf("%9.1f ms %5.1f%% %5d  %s\n", order[i].first / 1e3, 100 * order[i].first / total,
                  self[order[i].second].second, order[i].second.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canzona: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
