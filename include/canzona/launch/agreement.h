// Agreement on the launch configuration before the first collective (docs/design.md section 4),
// shared by every launch (`canzona run`/`compare`, `canzona train`).
//
// Terms. A *setting* is one (key, value) pair of the effective configuration of a launch: the key
// is the CLI flag that sets it ("--steps"), the value its canonical text after parsing and defaults
// ("2", "deterministic", option JSON with sorted keys). The *settings* of a launch are every
// setting ranks must agree on, in a fixed order; ranks launched with different flags (OpenMPI's
// MPMD syntax, a wrapper script, a different model file behind the same path) disagree on some
// setting, and would otherwise hang in mismatched collectives or silently run different
// experiments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canzona/comm/communicator.h"
#include "canzona/model/spec.h"

namespace canzona::launch {

struct Setting {
  std::string key;    // the CLI flag, e.g. "--steps"; "model spec" for the loaded model's hash
  std::string value;  // canonical text: integers in decimal, doubles with 17 digits, JSON dumped
};

using Settings = std::vector<Setting>;

// At most this many bytes of a value are exchanged to name it in a disagreement message (longer
// values, e.g. long option JSON, are shown cut there; the comparison itself uses the full text).
inline constexpr std::size_t kMaxShownValueBytes = 64;

// Stable 64-bit FNV-1a hash of everything ranks execute from `model`: name, architecture and
// every param's name, shape, TP split, optimizer class, layer, stage and pieces.
std::uint64_t model_hash(const model::ModelSpec& model);

// A double as a setting's value: 17 significant digits, so equal text means equal bits.
std::string setting_value(double v);

// "key=value" lines, one per setting, in order (what the hashes below are computed over).
std::string settings_text(const Settings& settings);

// Collective over `world` (control traffic only: all_gather_u64). Returns when every rank holds
// the same settings (one collective). Otherwise every rank exchanges per-setting hashes over the
// prefix all ranks have and throws the same PlanAgreementError, "ranks disagree on <key>: rank R
// has <value>, rank 0 has <value>", naming the first differing setting and the lowest rank that
// differs from rank 0 (or, when the keys themselves differ there, both keys); when that prefix
// agrees, the differing counts are reported.
void check_agreement(comm::Communicator& world, const Settings& settings);

// Collective over `world`, the first one of a launch: `error` is this rank's usage error found
// before MPI started ("" when none). Returns 0 when no rank has one. Otherwise the lowest rank
// with an error prints it as the one line "canzona: error: <error>" on stderr and every rank
// returns 2 (exit quietly: with the same flags every rank found the same error, and with
// different flags the lowest rank's is the one shown), so a bad flag gives one line, not one per
// rank, and no abort banner.
int agree_on_launch_error(comm::Communicator& world, const std::string& error);

}  // namespace canzona::launch
