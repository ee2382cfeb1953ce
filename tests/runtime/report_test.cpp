// Output formats: the --json keys the issue names, the table's ratio line, and trace events that
// parse as JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "canzona/engine/trace.h"
#include "canzona/runtime/run_report.h"

namespace canzona::runtime {
namespace {

CompareResult sample() {
  CompareResult r;
  r.model_name = "qwen3-tiny";
  r.options.dims.dp = 2;
  for (plan::Strategy s : {plan::Strategy::kSc, plan::Strategy::kLbAsc}) {
    StrategyResult sr;
    sr.strategy = s;
    sr.median.opt = s == plan::Strategy::kSc ? 20.0 : 10.0;
    sr.median.step = 30.0;
    if (s == plan::Strategy::kSc) {
      sr.dp_bytes.all_reduce = 4096;
      sr.dp_phase_bytes.grad_sync = 4096;
    } else {
      sr.dp_bytes.reduce_scatter = 2048;
      sr.dp_bytes.all_gather = 2048;
      sr.dp_phase_bytes.grad_sync = 2048;
      sr.dp_phase_bytes.param_sync = 1024;  // not the real ratio: totals must add both phases
    }
    sr.opt_cpu_ms = {9.0, 10.0};
    sr.busy_cpu_ms = {12.0, 13.0};
    r.strategies.push_back(sr);
  }
  r.verify.ran = true;
  r.verify.bitwise = true;
  r.verify.passed = true;
  return r;
}

TEST(ReportJson, HasTheIssueKeys) {
  const nlohmann::json j = report_json(sample());
  for (const char* name : {"sc", "lb-asc"}) {
    const nlohmann::json& s = j.at("strategies").at(name);
    for (const char* key : {"step_ms", "opt_ms", "grad_sync_ms", "param_sync_ms"})
      EXPECT_TRUE(s.at(key).is_number()) << name << "." << key;
    for (const char* key : {"reduce_scatter", "all_gather", "all_reduce", "all_to_all"})
      EXPECT_TRUE(s.at("bytes").at(key).is_number_integer()) << name << ".bytes." << key;
  }
  EXPECT_EQ(j.at("verify").at("bitwise"), true);
  EXPECT_EQ(j.at("strategies").at("lb-asc").at("bytes").at("reduce_scatter"), 2048);
  const nlohmann::json& phases = j.at("strategies").at("lb-asc").at("dp_phase_bytes");
  EXPECT_EQ(phases.at("grad_sync"), 2048);
  EXPECT_EQ(phases.at("param_sync"), 1024);
  EXPECT_EQ(phases.at("optimizer"), 0);
  EXPECT_EQ(phases.at("total"), 3072);
}

TEST(ReportTable, PrintsTheLbAscRatios) {
  const std::string table = format_report(sample());
  EXPECT_NE(table.find("optimizer step 2.00x faster"), std::string::npos) << table;
  // DP bytes per step: (2048 + 1024) / 4096, gradient and parameter sync together.
  EXPECT_NE(table.find("(gradient + parameter sync) 0.750x"), std::string::npos) << table;
  EXPECT_NE(table.find("bitwise identical"), std::string::npos) << table;
}

TEST(TraceEvents, ParseAsChromeTraceJson) {
  engine::Trace trace(true);
  trace.span(engine::kCollectiveTrack, "collective", "bucket \"0\" all-gather", 1.0, 3.5);
  { engine::TraceScope scope(trace, "phase", "optimizer"); }
  const nlohmann::json events = nlohmann::json::parse("[" + trace.events_json(3) + "]");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].at("ph"), "X");
  EXPECT_EQ(events[0].at("pid"), 3);
  EXPECT_EQ(events[0].at("tid"), engine::kCollectiveTrack);
  EXPECT_EQ(events[0].at("name"), "bucket \"0\" all-gather");
  EXPECT_DOUBLE_EQ(events[0].at("dur").get<double>(), 2.5);
  EXPECT_EQ(events[1].at("tid"), engine::kComputeTrack);
}

TEST(TraceEvents, DisabledTraceRecordsNothing) {
  engine::Trace trace(false);
  trace.span(0, "x", "y", 0.0, 1.0);
  { engine::TraceScope scope(trace, "phase", "optimizer"); }
  EXPECT_EQ(trace.size(), 0u);
}

}  // namespace
}  // namespace canzona::runtime
