// Test-only fault injection. A fault is armed at a *site* (a world rank and, for the faults tied
// to a training step, that step); the code where the fault happens asks fires(). Only the hidden
// --test-* flags of the CLIs and the tests arm faults, so no production option struct carries a
// test hook. Arm and disarm before any rank starts: ranks of the thread backend read the armed
// sites concurrently, and nothing writes them while ranks run.
#pragma once

#include <cstdint>

namespace canzona::faults {

enum class Fault {
  kPerturbPlan,     // `run`/`compare`: this rank plans with the other planner variant, so the
                    // plan-hash check must catch the disagreement
  kCorruptParams,   // `run`/`compare`: this rank flips the lowest bit of the first element of its
                    // first layout slot after the run, before --verify gathers the params
  kPoisonLoss,      // `train`: at this step this rank multiplies its first micro-batch's loss by
                    // NaN, so the non-finite path must stop every rank
  kKillAfterStep,   // `train`: this rank raises SIGKILL right after this step (and its save)
  kKillInSave,      // `train`: this rank raises SIGKILL inside this step's save, after the data
                    // is written and before the directory is published
  kStallAfterStep,  // `train`: this rank sleeps for good right after this step (a hung rank), so
                    // the others' collective timeout must end the job
};

struct Site {
  int rank = -1;          // world rank; -1: not armed
  std::int64_t step = 0;  // 1-based training step (the step faults), else 0
};

void arm(Fault fault, Site site);
void disarm(Fault fault);
void disarm_all();

// Where `fault` is armed ({-1, 0} when it is not).
Site site(Fault fault);

// True when `fault` is armed at world rank `rank` (and, for a step fault, at `step`).
bool fires(Fault fault, int rank);
bool fires(Fault fault, int rank, std::int64_t step);

// Arms a fault for its scope (tests).
class Scoped {
 public:
  Scoped(Fault fault, Site site) : fault_(fault) { arm(fault, site); }
  ~Scoped() { disarm(fault_); }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

 private:
  Fault fault_;
};

}  // namespace canzona::faults
