// `canzona bench-kernels`: how fast the optimizer kernels run on this core, against the fp32 peak.
//
// Measures, per shape (rows x cols of a weight), medians of N runs on one BLAS thread:
//   sgemm          C (s x l) = A (s x s) B (s x l), s = min(rows, cols), l = max: Newton–Schulz's
//                  update GEMM in the wide orientation it runs on
//   bf16_gemm      the same product in bf16 (--ns-dtype bf16): operands bf16, fp32 sums, on this
//                  CPU's bf16 backend (optim/bf16_products.h), the plain GEMM of that library
//   newton_schulz  Newton–Schulz (default 5 simple steps, --ns-dtype, --ns-algorithm), rated by
//                  the standard iteration's nominal FLOPs steps (4 s^2 l + 2 s^3) whatever runs,
//                  so a Gram iteration's rate shows its gain; the rate of the FLOPs executed is
//                  given too (one triangle of each symmetric product), and the fraction of the
//                  GEMM of its dtype (sgemm or bf16_gemm)
//   muon, shampoo, soap, adamw   full optimizer steps from the registry (Shampoo/SOAP: steady,
//                                refresh and amortised over the preconditioning frequency); their
//                                rates use cost::optimizer_flops, the planner's FLOP model
// and prints each rate as a fraction of the fp32 peak of this core: the FMA throughput of a
// register-only loop measured right now (the default, labelled "measured"), or --peak when given
// (labelled "given"). The OpenBLAS core in use and where it came from head the output.
// --json writes the results; --calibration fits seconds = a + b * optimizer_flops per optimizer
// (cost/calibration.h) for `canzona plan --cost calibrated --calibration FILE`.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/cost/calibration.h"
#include "canzona/cost/cost.h"
#include "canzona/optim/bf16_products.h"
#include "canzona/optim/blas_env.h"
#include "canzona/optim/kernel_bench.h"
#include "command.h"

namespace canzona::apps {
namespace {

// Bounds on the flags, so a typo cannot ask for terabytes or for a run that never ends. The
// largest shape (16384 x 4096, a Llama-class fc2) needs ~0.3 GiB per buffer and Shampoo's
// preconditioners 2 x 16384^2 x 4 bytes = 2 GiB; one Newton-Schulz step on it takes seconds.
constexpr std::int64_t kMaxBenchSide = 16384;                      // rows or cols of a shape
constexpr std::int64_t kMaxBenchElements = std::int64_t{1} << 26;  // rows x cols of a shape
constexpr int kMaxBenchRepeats = 1000;                             // --repeats
constexpr int kMaxBenchNsSteps = 100;                              // --ns-steps
constexpr int kMaxBenchFrequency = 1 << 20;                        // --frequency
constexpr double kMaxPeakGflops = 1e6;                             // --peak: 1 PFLOP/s per core

struct BenchFlags {
  bool quick = false;
  int repeats = -1;          // -1: 5, or 3 with --quick
  double peak_gflops = 0.0;  // 0: the measured FMA loop
  std::string shapes;        // "RxC,RxC,..."; empty: the default set
  std::string kernels = "sgemm,ns,muon,shampoo,soap,adamw";
  std::string ns_coefficients = "simple";
  int ns_steps = 5;
  std::string ns_dtype = "fp32";
  std::string ns_algorithm = "standard";
  int frequency = 10;
  std::string json;
  std::string calibration;
  bool json_given = false, calibration_given = false;  // even when empty
  bool peak_given = false;
};

struct Shape {
  std::int64_t rows = 0, cols = 0;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// "ROWSxCOLS,..." with each side in [1, kMaxBenchSide] and rows x cols <= kMaxBenchElements.
std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  for (const std::string& item : split(text, ',')) {
    Shape s;
    const char* begin = item.data();
    const char* end = item.data() + item.size();
    const auto rows = std::from_chars(begin, end, s.rows);
    const bool has_x = rows.ec == std::errc() && rows.ptr != end && *rows.ptr == 'x';
    const auto cols = has_x ? std::from_chars(rows.ptr + 1, end, s.cols) : rows;
    CANZONA_REQUIRE(
        has_x && cols.ec == std::errc() && cols.ptr == end && s.rows >= 1 && s.cols >= 1,
        "--shapes: '", item, "' is not ROWSxCOLS with positive sizes");
    require_in_range(s.rows, 1, kMaxBenchSide, str("--shapes ", item, ": rows"), "kMaxBenchSide");
    require_in_range(s.cols, 1, kMaxBenchSide, str("--shapes ", item, ": cols"), "kMaxBenchSide");
    require_in_range(s.rows * s.cols, 1, kMaxBenchElements, str("--shapes ", item, ": rows x cols"),
                     "kMaxBenchElements");
    shapes.push_back(s);
  }
  CANZONA_REQUIRE(!shapes.empty(), "--shapes: no shape given");
  return shapes;
}

std::string shape_name(const Shape& s) {
  return str(s.rows, "x", s.cols);
}

class Report {
 public:
  Report(double peak, double measured) : peak_(peak), measured_(measured) {}

  // One row: name, shape, seconds, FLOPs (0: no rate), an optional note.
  // Throws Error naming the kernel when the time or the rate is not finite (a clock fault).
  nlohmann::json add(const std::string& kernel, const Shape& s, double seconds, double flops,
                     const std::string& note = "") {
    const double gflops = flops > 0 ? flops / seconds / 1e9 : 0.0;
    if (!std::isfinite(seconds) || !(seconds > 0) || !std::isfinite(gflops))
      throw Error(str(kernel, " ", shape_name(s), ": measured time ", seconds, " s gives rate ",
                      gflops, " GFLOP/s, not a finite number"));
    std::printf("%-14s %-10s %11.6f", kernel.c_str(), shape_name(s).c_str(), seconds);
    if (gflops > 0) {
      std::printf(" %9.1f %8.1f%%", gflops, 100.0 * gflops / peak_);
      if (measured_ > 0) std::printf(" %8.1f%%", 100.0 * gflops / measured_);
    }
    std::printf("  %s\n", note.c_str());
    nlohmann::json row = {
        {"kernel", kernel}, {"rows", s.rows}, {"cols", s.cols}, {"median_s", seconds}};
    if (gflops > 0) {
      row["gflops"] = gflops;
      row["fraction_of_peak"] = gflops / peak_;
      if (measured_ > 0) row["fraction_of_measured_peak"] = gflops / measured_;
    }
    return row;
  }

 private:
  double peak_, measured_;
};

bool wants(const BenchFlags& f, const std::string& kernel) {
  for (const std::string& k : split(f.kernels, ','))
    if (k == kernel) return true;
  return false;
}

int run_bench(const BenchFlags& f) {
  if (f.json_given) check_output_path(f.json, "--json");
  if (f.calibration_given) check_output_path(f.calibration, "--calibration");
  CANZONA_REQUIRE(f.repeats == -1 || f.repeats >= 1, "--repeats must be >= 1 (got ", f.repeats,
                  ")");
  require_in_range(f.repeats, -1, kMaxBenchRepeats, "--repeats", "kMaxBenchRepeats");
  const int repeats = f.repeats >= 1 ? f.repeats : (f.quick ? 3 : 5);
  CANZONA_REQUIRE(!f.peak_given || (std::isfinite(f.peak_gflops) && f.peak_gflops > 0 &&
                                    f.peak_gflops <= kMaxPeakGflops),
                  "--peak = ", f.peak_gflops, " must lie in (0, ", kMaxPeakGflops,
                  "] GFLOP/s (kMaxPeakGflops)");
  CANZONA_REQUIRE(f.ns_steps >= 0, "--ns-steps must be >= 0 (got ", f.ns_steps, ")");
  require_in_range(f.ns_steps, 0, kMaxBenchNsSteps, "--ns-steps", "kMaxBenchNsSteps");
  CANZONA_REQUIRE(f.frequency >= 1, "--frequency must be >= 1 (got ", f.frequency, ")");
  require_in_range(f.frequency, 1, kMaxBenchFrequency, "--frequency", "kMaxBenchFrequency");
  for (const std::string& k : split(f.kernels, ','))
    CANZONA_REQUIRE(k == "sgemm" || k == "bf16_gemm" || k == "ns" || k == "muon" ||
                        k == "shampoo" || k == "soap" || k == "adamw",
                    "--kernels: unknown kernel '", k,
                    "' (known: sgemm, bf16_gemm, ns, muon, shampoo, soap, adamw)");
  const std::vector<Shape> shapes =
      parse_shapes(!f.shapes.empty() ? f.shapes
                   : f.quick         ? "512x512,1024x1024"
                                     : "1024x3072,2048x2048,4096x1024,512x512");
  optim::NewtonSchulzOptions ns;
  ns.coefficients = optim::parse_ns_coefficients(f.ns_coefficients);
  ns.steps = f.ns_steps;
  try {
    ns.dtype = optim::parse_ns_dtype(f.ns_dtype);
  } catch (const UsageError& e) {
    throw UsageError(str("--ns-dtype: ", e.what()));
  }
  try {
    ns.algorithm = optim::parse_ns_algorithm(f.ns_algorithm);
  } catch (const UsageError& e) {
    throw UsageError(str("--ns-algorithm: ", e.what()));
  }
  const bool bf16 = ns.dtype == optim::NsDtype::kBF16;
  // The GEMM the iteration is held against: bf16's when its products are bf16.
  const bool bf16_gemm = wants(f, "bf16_gemm") || (bf16 && wants(f, "sgemm"));
  const std::vector<std::string> optimizers = {"muon", "shampoo", "soap", "adamw"};
  if (f.calibration_given) {
    CANZONA_REQUIRE(shapes.size() >= 2, "--calibration needs at least 2 shapes to fit");
    for (const std::string& name : optimizers)
      CANZONA_REQUIRE(wants(f, name), "--calibration needs kernel '", name, "' in --kernels");
  }

  const double measured = optim::measure_fma_peak_gflops();
  const optim::CpuVectorInfo vector = optim::cpu_vector_info();
  const std::string cpu = optim::cpu_model_name();
  CANZONA_REQUIRE(f.peak_given || measured > 0,
                  "this CPU has neither AVX-512 nor AVX2 FMA, so no peak can be measured; give "
                  "--peak GFLOP/s");
  const double peak = f.peak_given ? f.peak_gflops : measured;
  const std::string peak_source = f.peak_given ? "given (--peak)" : "measured (FMA loop)";
  std::printf("cpu: %s, %d fp32 lanes per FMA, reported clock %.0f MHz (/proc/cpuinfo)\n",
              cpu.c_str(), vector.fp32_lanes, vector.reported_mhz);
  std::printf("OpenBLAS core: %s; recommended for this CPU: %s; BLAS threads: %d\n",
              optim::blas_core_report().c_str(), optim::recommended_blas_core().c_str(),
              optim::blas_threads());
  const double sgemm_error = optim::sgemm_error_bound_fraction();
  std::printf(
      "sgemm vs an fp64 triple loop (256x384x512): worst error %.3g of the fp32 bound (%s)\n",
      sgemm_error, sgemm_error <= 1.0 ? "correct" : "WRONG RESULTS");
  std::printf("bf16 products: %s\n", optim::bf16_backend_report().c_str());
  std::printf("Newton-Schulz: %s x %d, ns_dtype %s, ns_algorithm %s\n", f.ns_coefficients.c_str(),
              f.ns_steps, f.ns_dtype.c_str(), f.ns_algorithm.c_str());
  std::printf(
      "fp32 peak per core: %.1f GFLOP/s, %s; FMA loop measured now: %.1f GFLOP/s\n"
      "median of %d runs after one warm-up\n\n",
      peak, peak_source.c_str(), measured, repeats);
  std::printf("%-14s %-10s %11s %9s %9s %9s\n", "kernel", "shape", "median_s", "GFLOP/s", "%peak",
              "%measured");

  Report report(peak, measured);
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> misses;
  int checked = 0, ns_rows = 0, ns_checked = 0;  // targets evaluated (a row below 1024 is not)
  // The cost model prices each optimizer with the options it is timed with.
  auto cost_options = [&f](const std::string& name) {
    cost::CostOptions c;
    c.matrix_optimizer = name;
    const nlohmann::json known = optim::effective_options(name, nlohmann::json::object());
    if (known.contains("ns_steps")) c.optimizer_options["ns_steps"] = f.ns_steps;
    if (known.contains("ns_dtype")) c.optimizer_options["ns_dtype"] = f.ns_dtype;
    if (known.contains("ns_algorithm")) c.optimizer_options["ns_algorithm"] = f.ns_algorithm;
    if (known.contains("precondition_frequency"))
      c.optimizer_options["precondition_frequency"] = f.frequency;
    return c;
  };
  std::map<std::string, std::vector<cost::CalibrationSample>> samples;

  for (const Shape& s : shapes) {
    double sgemm_rate = 0.0;
    if (wants(f, "sgemm")) {
      const double t = optim::time_sgemm(s.rows, s.cols, repeats).median_s;
      sgemm_rate = optim::sgemm_flops(s.rows, s.cols) / t;
      rows.push_back(report.add("sgemm", s, t, optim::sgemm_flops(s.rows, s.cols)));
      ++checked;
      if (sgemm_rate / 1e9 < 0.85 * peak)
        misses.push_back(str("sgemm ", shape_name(s), " below 85% of the peak"));
    }
    double bf16_rate = 0.0;
    if (bf16_gemm) {
      const double t = optim::time_bf16_gemm(s.rows, s.cols, repeats).median_s;
      bf16_rate = optim::sgemm_flops(s.rows, s.cols) / t;
      rows.push_back(report.add("bf16_gemm", s, t, optim::sgemm_flops(s.rows, s.cols),
                                optim::to_string(optim::bf16_backend())));
    }
    const double gemm_rate = bf16 ? bf16_rate : sgemm_rate;
    const char* gemm_name = bf16 ? "bf16_gemm" : "sgemm";
    if (wants(f, "ns")) {
      const double t = optim::time_newton_schulz(s.rows, s.cols, ns, repeats).median_s;
      const double flops = optim::newton_schulz_flops(s.rows, s.cols, ns.steps);
      const double executed = optim::newton_schulz_executed_flops(s.rows, s.cols, ns);
      const bool gram = optim::uses_gram(s.rows, s.cols, ns);
      ++ns_rows;
      std::string note = gram ? "gram; " : "";
      nlohmann::json row;
      if (gemm_rate > 0) {
        const double ratio = flops / t / gemm_rate;
        const double executed_ratio = executed / t / gemm_rate;
        note += str(static_cast<int>(100.0 * ratio + 0.5), "% of ", gemm_name,
                    " (executed FLOPs: ", static_cast<int>(100.0 * executed_ratio + 0.5), "%)");
        row = report.add("newton_schulz", s, t, flops, note);
        row["reference_gemm"] = gemm_name;
        row["fraction_of_gemm"] = ratio;
        row["executed_fraction_of_gemm"] = executed_ratio;
        // fp32: >= 85% of sgemm; bf16: >= 90% of the bf16 GEMM (the bf16 iteration's target).
        const double target = bf16 ? 0.90 : 0.85;
        if (std::min(s.rows, s.cols) >= 1024) {
          ++checked;
          ++ns_checked;
        }
        if (std::min(s.rows, s.cols) >= 1024 && ratio < target)
          misses.push_back(str("newton_schulz ", shape_name(s), " below ",
                               static_cast<int>(100 * target), "% of ", gemm_name));
      } else {
        row = report.add("newton_schulz", s, t, flops, gram ? "gram" : "");
      }
      row["executed_gflops"] = executed / t / 1e9;
      row["gram"] = gram;
      rows.push_back(row);
    }
    for (const std::string& name : optimizers) {
      if (!wants(f, name)) continue;
      nlohmann::json options = nlohmann::json::object();
      if (name == "muon")
        options = {{"ns_steps", ns.steps},
                   {"ns_coefficients", f.ns_coefficients},
                   {"ns_dtype", f.ns_dtype},
                   {"ns_algorithm", f.ns_algorithm}};
      const optim::StepTiming t =
          optim::time_optimizer_step(name, s.rows, s.cols, options, f.frequency, repeats);
      const double flops = cost::optimizer_flops(name, s.rows, s.cols, cost_options(name));
      const bool preconditioned = name == "shampoo" || name == "soap";
      nlohmann::json row =
          report.add(name + "_step", s, t.amortised_s, flops,
                     preconditioned ? str("amortised over f=", t.frequency, ": steady ", t.steady_s,
                                          " s, refresh ", t.refresh_s, " s")
                                    : "");
      row["steady_s"] = t.steady_s;
      row["refresh_s"] = t.refresh_s;
      row["amortised_s"] = t.amortised_s;
      row["frequency"] = t.frequency;
      rows.push_back(row);
      samples[name].push_back({s.rows, s.cols, t.amortised_s});
    }
  }

  if (sgemm_error > 1.0)
    misses.push_back(str("sgemm results outside the fp32 error bound under OpenBLAS core ",
                         optim::blas_core_name()));
  std::printf(
      "\ntargets (85%% of the %.1f GFLOP/s peak for sgemm; NS >= %s on sides >= 1024): %s\n", peak,
      bf16 ? "90% of the bf16 GEMM" : "85% of sgemm",
      !misses.empty() ? "MISSED"
      : checked > 0   ? "met"
                      : "not checked");
  if (ns_rows > 0 && ns_checked == 0)
    std::printf(
        "  not checked: Newton-Schulz (it needs a shape with both sides >= 1024 and the %s "
        "row of the same shape)\n",
        bf16 ? "bf16_gemm" : "sgemm");
  for (const std::string& m : misses) std::printf("  missed: %s\n", m.c_str());

  if (f.json_given) {
    nlohmann::json out = {{"cpu", cpu},
                          {"cpu_fp32_lanes", vector.fp32_lanes},
                          {"cpu_reported_mhz", vector.reported_mhz},
                          {"blas_core", optim::blas_core_name()},
                          {"blas_core_source", optim::blas_core_source()},
                          {"blas_core_recommended", optim::recommended_blas_core()},
                          {"blas_core_weaker_than_cpu", optim::blas_core_weaker_than_cpu()},
                          {"blas_threads", optim::blas_threads()},
                          {"sgemm_error_bound_fraction", sgemm_error},
                          {"peak_gflops", peak},
                          {"peak_source", peak_source},
                          {"measured_fma_peak_gflops", measured},
                          {"repeats", repeats},
                          {"ns_coefficients", f.ns_coefficients},
                          {"ns_steps", f.ns_steps},
                          {"ns_dtype", f.ns_dtype},
                          {"ns_algorithm", f.ns_algorithm},
                          {"bf16_backend", optim::to_string(optim::bf16_backend())},
                          {"bf16_backend_report", optim::bf16_backend_report()},
                          {"precondition_frequency", f.frequency},
                          {"results", rows},
                          {"targets_missed", misses}};
    write_json_file(f.json, out);
    std::printf("wrote %s\n", f.json.c_str());
  }
  if (f.calibration_given) {
    cost::Calibration calibration;
    calibration.cpu = cpu;
    calibration.blas_core = optim::blas_core_name();
    for (const std::string& name : optimizers)
      calibration.fit(name, samples[name], cost_options(name));
    calibration.write(f.calibration);
    std::printf("wrote %s\n", f.calibration.c_str());
  }
  return 0;
}

}  // namespace

void add_bench_kernels_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  auto* sub = app.add_subcommand(
      "bench-kernels",
      "Time sgemm, Newton-Schulz and the optimizer steps against the fp32 peak; write results "
      "and a calibration for the planner");
  sub->add_flag("--quick", flags->quick, "short run: shapes 512x512,1024x1024, 3 repeats");
  sub->add_option("--repeats", flags->repeats, "timed runs per kernel (median reported)");
  auto* peak = sub->add_option("--peak", flags->peak_gflops,
                               "fp32 peak per core, GFLOP/s (default: the FMA loop measured now)");
  sub->add_option("--shapes", flags->shapes,
                  "comma-separated ROWSxCOLS (default 1024x3072,2048x2048,4096x1024,512x512)");
  sub->add_option("--kernels", flags->kernels,
                  "subset of sgemm,bf16_gemm,ns,muon,shampoo,soap,adamw (bf16_gemm joins sgemm "
                  "under --ns-dtype bf16)")
      ->capture_default_str();
  sub->add_option("--ns-coefficients", flags->ns_coefficients, "simple | quintic | polar_express")
      ->capture_default_str();
  sub->add_option("--ns-steps", flags->ns_steps, "Newton-Schulz iterations")->capture_default_str();
  sub->add_option("--ns-dtype", flags->ns_dtype, "Newton-Schulz products: fp32 | bf16")
      ->capture_default_str();
  sub->add_option("--ns-algorithm", flags->ns_algorithm, "Newton-Schulz iteration: standard | gram")
      ->capture_default_str();
  sub->add_option("--frequency", flags->frequency, "Shampoo/SOAP preconditioning frequency")
      ->capture_default_str();
  auto* json = sub->add_option("--json", flags->json, "write the results as JSON to FILE");
  auto* calibration = sub->add_option("--calibration", flags->calibration,
                                      "fit and write the calibrated cost model (JSON) to FILE");
  sub->callback([flags, json, calibration, peak, &exit_code] {
    flags->peak_given = peak->count() > 0;
    flags->json_given = json->count() > 0;
    flags->calibration_given = calibration->count() > 0;
    exit_code = run_bench(*flags);
  });
}

}  // namespace canzona::apps
