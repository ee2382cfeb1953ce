// Which library runs the bf16 products of Muon's ns_dtype bf16 on this CPU (muon.h), for reports
// (bench-kernels, the train header line, --json).
//
// Terms. *oneDNN*: oneDNN's bf16 matmul (Debian 12's libdnnl 2.6.3), bf16 operands summed in fp32
// on the CPU's bf16 matrix unit (AMX tiles) or bf16 dot-product instructions (AVX512-BF16),
// whichever oneDNN dispatches to. *widened*: where oneDNN has no bf16 matmul (a CPU without
// AVX512-BF16 or AMX, e.g. AVX2 only), the operands are rounded to bf16, kept as fp32 values and
// multiplied by OpenBLAS's sgemm/ssyrk: the same bf16 x bf16 products with fp32 sums, at the fp32
// rate, in OpenBLAS's order (other bits than oneDNN's; every rank of a launch runs on the same
// kind of CPU, as it does for the OpenBLAS core).
#pragma once

#include <string>

namespace canzona::optim {

enum class Bf16Backend { kOneDnn, kWidened };

// The backend of this process (probed once: can oneDNN make a bf16 matmul here?).
Bf16Backend bf16_backend();
// "onednn" | "widened".
const char* to_string(Bf16Backend backend);
// One line, e.g. "oneDNN 2.6.3 bf16 matmul (avx512_core_amx)" or "widened: bf16-rounded operands
// on OpenBLAS sgemm (oneDNN 2.6.3 has no bf16 matmul for this CPU's avx2)".
std::string bf16_backend_report();

}  // namespace canzona::optim
