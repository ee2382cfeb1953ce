# cmake -DCOMMAND=<;-list> -DRC=<exit code> -DEXPECT=<regex> [-DONCE=<regex>] [-DTIMEOUT=<s>]
#       -DEXPECT_RUN=<cmake/expect_run.cmake>
#       [-DREMOVE=<file>] [-DABSENT=<file>] [-DNOT_EXPECT=<regex>]
#       [-DLOSS_JSON=<file> -DLOSS_DROP_MILLI=<milli-nats>] -P expect_run_more.cmake
# expect_run.cmake (exit status, EXPECT, ONCE, NOT_EXPECT, ONE_LINE) plus what it cannot check:
#   REMOVE      deleted before the run (so a file found afterwards was written by it);
#   ABSENT      must not exist after the run (a failed run writes nothing);
#   LOSS_JSON   a `canzona train --json` file whose last validation loss lies at least
#               LOSS_DROP_MILLI / 1000 nats below its first training step's loss, every run.
if(REMOVE)
  file(REMOVE "${REMOVE}")
endif()
include("${EXPECT_RUN}")
if(ABSENT AND EXISTS "${ABSENT}")
  message(FATAL_ERROR "${ABSENT} exists after the run, which must write nothing")
endif()
if(NOT LOSS_JSON)
  return()
endif()

# A loss (a plain positive decimal as nlohmann::json prints it) in integer milli-nats, rounded down.
function(to_milli value var)
  if(NOT value MATCHES "^([0-9]+)(\\.([0-9]*))?$")
    message(FATAL_ERROR "loss '${value}' is not a plain positive decimal")
  endif()
  string(SUBSTRING "${CMAKE_MATCH_3}000" 0 3 frac)
  math(EXPR milli "${CMAKE_MATCH_1} * 1000 + ${frac}")
  set(${var} ${milli} PARENT_SCOPE)
endfunction()

if(NOT EXISTS "${LOSS_JSON}")
  message(FATAL_ERROR "--json ${LOSS_JSON} was not written")
endif()
file(READ "${LOSS_JSON}" json)
string(JSON steps GET "${json}" steps)
string(JSON runs LENGTH "${json}" runs)
if(runs LESS 1)
  message(FATAL_ERROR "${LOSS_JSON}: no runs")
endif()
math(EXPR last_run "${runs} - 1")
foreach(r RANGE ${last_run})
  string(JSON strategy GET "${json}" runs ${r} strategy)
  string(JSON n_steps LENGTH "${json}" runs ${r} steps)
  string(JSON n_val LENGTH "${json}" runs ${r} val)
  if(NOT n_steps EQUAL steps OR n_val LESS 1)
    message(FATAL_ERROR "${strategy}: ${n_steps} of ${steps} steps and ${n_val} validations")
  endif()
  string(JSON first GET "${json}" runs ${r} steps 0 loss)
  math(EXPR last_val "${n_val} - 1")
  string(JSON val GET "${json}" runs ${r} val ${last_val} loss)
  string(JSON val_step GET "${json}" runs ${r} val ${last_val} step)
  to_milli("${first}" first_milli)
  to_milli("${val}" val_milli)
  math(EXPR drop "${first_milli} - ${val_milli}")
  message("${strategy}: step 1 train loss ${first}, step ${val_step} val loss ${val}: "
          "drop ${drop} milli-nats (needed ${LOSS_DROP_MILLI})")
  if(NOT val_step EQUAL steps)
    message(FATAL_ERROR "${strategy}: last validation at step ${val_step}, not ${steps}")
  endif()
  if(drop LESS LOSS_DROP_MILLI)
    message(FATAL_ERROR "${strategy}: the loss fell by ${drop} milli-nats, less than "
                        "${LOSS_DROP_MILLI}")
  endif()
endforeach()
