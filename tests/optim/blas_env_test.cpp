// OpenBLAS kernel selection. OpenBLAS picks its kernels when the library loads, so checks that
// need a particular core run the blas_core_probe program as a child process with
// OPENBLAS_CORETYPE set. Results under the fast kernel are checked against a plain triple loop
// with an fp32 error bound: different kernels round differently, so this is not a bitwise test
// (bitwise tests are for repeatability under one kernel).
#include "canzona/optim/blas_env.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>

#include "digest.h"
#include "sgemm_check.h"

namespace canzona::optim {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

struct ChildResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs blas_core_probe with `args` and environment changes (nullptr value = unset).
ChildResult run_probe(const std::vector<std::string>& args,
                      const std::vector<std::pair<const char*, const char*>>& env) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    for (const auto& [name, value] : env) value ? setenv(name, value, 1) : unsetenv(name);
    std::vector<char*> argv{const_cast<char*>(CANZONA_BLAS_PROBE)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(CANZONA_BLAS_PROBE, argv.data());
    _exit(127);
  }
  close(fds[1]);
  ChildResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return upper(haystack).find(upper(needle)) != std::string::npos;
}

TEST(BlasCore, ReportsCoreAndRecommendation) {
  EXPECT_FALSE(blas_core_name().empty());
  std::printf("OpenBLAS core: %s, recommended: %s\n", blas_core_report().c_str(),
              recommended_blas_core().c_str());
  set_blas_threads(1);
  EXPECT_EQ(blas_threads(), 1);
}

TEST(BlasCore, DefaultCoreSgemmMatchesTripleLoop) {
  EXPECT_EQ(test::check_sgemm_against_triple_loop(), "");
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

TEST(BlasCore, SkylakexSgemmMatchesTripleLoop) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "CPU has no AVX-512";
  const ChildResult child = run_probe({"sgemm"}, {{"OPENBLAS_CORETYPE", "SKYLAKEX"}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "core: SkylakeX")) << child.output;
  EXPECT_TRUE(contains(child.output, "sgemm matches the triple loop")) << child.output;
}

TEST(BlasCore, RecommendedCoreSgemmMatchesTripleLoop) {
  const std::string core = recommended_blas_core();
  if (core.empty()) GTEST_SKIP() << "CPU has no AVX2/FMA";
  const ChildResult child = run_probe({"sgemm"}, {{"OPENBLAS_CORETYPE", core.c_str()}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "core: " + core)) << child.output;
  EXPECT_TRUE(contains(child.output, "sgemm matches the triple loop")) << child.output;
}

// Nothing ensure_blas_core does prints: the core is reported where it matters (bench-kernels,
// the train header, --json), never as a warning before an error line.
void expect_silent(const ChildResult& child) {
  EXPECT_FALSE(contains(child.output, "warning")) << child.output;
  EXPECT_FALSE(contains(child.output, "canzona:")) << child.output;
}

// A misdetecting host is simulated by loading OpenBLAS as PRESCOTT and clearing
// OPENBLAS_CORETYPE before ensure_blas_core runs: it must re-execute with the recommended core and
// report that canzona set it.
TEST(BlasCore, EnsureBlasCoreReexecutesMisdetectedCore) {
  if (recommended_blas_core().empty()) GTEST_SKIP() << "CPU has no AVX2/FMA";
  const ChildResult child =
      run_probe({"ensure", "--unset-coretype"}, {{"OPENBLAS_CORETYPE", "PRESCOTT"},
                                                 {"CANZONA_BLAS_REEXEC", nullptr},
                                                 {"OPENBLAS_NUM_THREADS", nullptr}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "core: " + recommended_blas_core())) << child.output;
  EXPECT_TRUE(contains(child.output, "reexecuted: yes")) << child.output;
  EXPECT_TRUE(contains(child.output, "weaker: no")) << child.output;
  EXPECT_TRUE(contains(child.output, "source: OPENBLAS_CORETYPE=" + recommended_blas_core() +
                                         ", set by canzona (OpenBLAS picked Prescott)"))
      << child.output;
  EXPECT_TRUE(contains(child.output, "threads: 1")) << child.output;
  expect_silent(child);
}

// A core the user set is respected without comment, even a weaker one.
TEST(BlasCore, EnsureBlasCoreRespectsUserForcedWeakerCoreSilently) {
  if (recommended_blas_core().empty()) GTEST_SKIP() << "CPU has no AVX2/FMA";
  const ChildResult child =
      run_probe({"ensure"}, {{"OPENBLAS_CORETYPE", "PRESCOTT"}, {"CANZONA_BLAS_REEXEC", nullptr}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "core: Prescott")) << child.output;
  EXPECT_TRUE(contains(child.output, "reexecuted: no")) << child.output;
  EXPECT_TRUE(contains(child.output, "weaker: yes")) << child.output;
  EXPECT_TRUE(contains(child.output, "source: OPENBLAS_CORETYPE=PRESCOTT, set by the environment"))
      << child.output;
  expect_silent(child);
}

// The machine's environment of today (OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512 on an
// AVX-512 CPU): kept as set, quietly.
TEST(BlasCore, EnsureBlasCoreKeepsEnvironmentHaswellQuietly) {
  if (recommended_blas_core().empty()) GTEST_SKIP() << "CPU has no AVX2/FMA";
  const ChildResult child = run_probe({"ensure"}, {{"OPENBLAS_CORETYPE", "Haswell"},
                                                   {"OPENBLAS_L2_SIZE", "512"},
                                                   {"CANZONA_BLAS_REEXEC", nullptr}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "core: Haswell")) << child.output;
  EXPECT_TRUE(contains(child.output, "reexecuted: no")) << child.output;
  expect_silent(child);
}

// Nothing set: OpenBLAS's own choice stands unless it is of a lower class than the CPU supports;
// either way the process ends on a core of the recommended class, quietly.
TEST(BlasCore, EnsureBlasCoreEndsOnRecommendedClass) {
  if (recommended_blas_core().empty()) GTEST_SKIP() << "CPU has no AVX2/FMA";
  const ChildResult child =
      run_probe({"ensure"}, {{"CANZONA_BLAS_REEXEC", nullptr}, {"OPENBLAS_CORETYPE", nullptr}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "weaker: no")) << child.output;
  expect_silent(child);
}

TEST(BlasCore, CoreClasses) {
  EXPECT_EQ(blas_core_class("SkylakeX"), 3);
  EXPECT_EQ(blas_core_class("COOPERLAKE"), 3);
  EXPECT_EQ(blas_core_class("sapphirerapids"), 3);
  EXPECT_EQ(blas_core_class("Haswell"), 2);
  EXPECT_EQ(blas_core_class("ZEN"), 2);
  EXPECT_EQ(blas_core_class("SandyBridge"), 1);
  EXPECT_EQ(blas_core_class("Prescott"), 0);
  EXPECT_EQ(blas_core_class(""), 0);
}

// Under whichever core the environment loaded (unset, Haswell, SkylakeX, Cooperlake), sgemm
// matches the double loop; each core in its own process.
TEST(BlasCore, EveryAvailableCoreSgemmMatchesTripleLoop) {
  if (recommended_blas_core().empty()) GTEST_SKIP() << "CPU has no AVX2/FMA";
  std::vector<const char*> cores = {nullptr, "HASWELL", "ZEN"};
  if (cpu_has_avx512()) cores.insert(cores.end(), {"SKYLAKEX", "COOPERLAKE"});
  for (const char* core : cores) {
    for (const char* l2 : {static_cast<const char*>(nullptr), "512"}) {
      const ChildResult child = run_probe({"sgemm"}, {{"OPENBLAS_CORETYPE", core},
                                                      {"OPENBLAS_L2_SIZE", l2},
                                                      {"CANZONA_BLAS_REEXEC", nullptr}});
      EXPECT_EQ(child.exit_code, 0) << (core ? core : "unset") << ": " << child.output;
      EXPECT_TRUE(contains(child.output, "sgemm matches the triple loop"))
          << (core ? core : "unset") << ": " << child.output;
    }
  }
}

// Same inputs, same bits in another process (docs/design.md section 5): every optimizer's result in
// a child process (same BLAS core, one thread) equals this process's, byte for byte.
TEST(Determinism, SameBitsInAnotherProcess) {
  set_blas_threads(1);
  const std::string here = test::optimizer_digest();
  // OPENBLAS_NUM_THREADS unset: the library itself defaults to one thread.
  const ChildResult child =
      run_probe({"digest"}, {{"OPENBLAS_NUM_THREADS", nullptr}, {"CANZONA_BLAS_REEXEC", nullptr}});
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_TRUE(contains(child.output, "threads: 1")) << child.output;
  EXPECT_TRUE(contains(child.output, "digest: " + here)) << here << " vs\n" << child.output;
}

}  // namespace
}  // namespace canzona::optim
