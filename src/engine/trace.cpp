#include "canzona/engine/trace.h"

#include <cstdio>

#include "canzona/comm/communicator.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::engine {
namespace {

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

std::string metadata(int pid, int tid, const char* what, const std::string& name) {
  return str("{\"ph\":\"M\",\"pid\":", pid, ",\"tid\":", tid, ",\"name\":\"", what,
             "\",\"args\":{\"name\":\"", escaped(name), "\"}}");
}

}  // namespace

Trace::Trace(bool enabled) : enabled_(enabled), epoch_(std::chrono::steady_clock::now()) {}

void Trace::reset_epoch() {
  epoch_ = std::chrono::steady_clock::now();
}

double Trace::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_)
      .count();
}

void Trace::span(int track, const std::string& category, const std::string& name, double start_us,
                 double end_us) {
  if (!enabled_) return;
  events_.push_back({track, category, name, start_us, end_us - start_us});
}

std::string Trace::events_json(int pid) const {
  std::string out;
  char numbers[96];
  for (const Event& e : events_) {
    if (!out.empty()) out += ",\n";
    std::snprintf(numbers, sizeof(numbers), "\"ts\":%.3f,\"dur\":%.3f", e.start_us, e.duration_us);
    out += str("{\"ph\":\"X\",\"pid\":", pid, ",\"tid\":", e.track, ",\"cat\":\"",
               escaped(e.category), "\",\"name\":\"", escaped(e.name), "\",", numbers, "}");
  }
  return out;
}

TraceScope::TraceScope(Trace& trace, const char* category, std::string name)
    : trace_(trace), category_(category), name_(std::move(name)), start_us_(trace.now_us()) {}

TraceScope::~TraceScope() {
  if (trace_.enabled()) trace_.span(kComputeTrack, category_, name_, start_us_, trace_.now_us());
}

void write_chrome_trace(comm::Grid& grid, const Trace& trace, const std::string& path) {
  const int rank = grid.world().rank();
  const comm::GridCoord c = grid.coord();
  std::string mine =
      metadata(rank, 0, "process_name",
               str("rank ", rank, " (", grid.dims().pp > 1 ? str("pp ", c.pp, ", ") : "", "dp ",
                   c.dp, ", tp ", c.tp, ")"));
  mine += ",\n" + metadata(rank, kComputeTrack, "thread_name", "compute");
  mine += ",\n" + metadata(rank, kCollectiveTrack, "thread_name", "collectives in flight");
  if (grid.dims().pp > 1)
    mine += ",\n" +
            metadata(rank, kPipelineTrack, "thread_name", str("pipeline stage ", c.pp, " (1F1B)"));
  const std::string events = trace.events_json(rank);
  if (!events.empty()) mine += ",\n" + events;
  const std::vector<std::string> all = comm::gather_bytes_to_root(grid.world(), mine);
  if (rank != 0) return;
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (std::size_t q = 0; q < all.size(); ++q) {
    if (q > 0) text += ",\n";
    text += all[q];
  }
  text += "\n]}\n";
  write_text_file(path, text);
}

}  // namespace canzona::engine
