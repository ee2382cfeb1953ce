# cmake -DOUT=<dir> -DCANZONA=<canzona> -DSPM_TRAIN=<spm_train> -DPYTHON=<python3>
#       -DTEXT=<UTF-8 text file> -DSHARD_WRITER=<write_llmc_shard.py> -P make_data.cmake
# The inputs of the train_cli_ tests (fixture train_cli_data), made afresh in OUT:
#   spm300.model / spm600.model  SentencePiece BPE models of TEXT (vocabulary 300 / 600; qwen3-tiny
#                                has 512);
#   shard.bin / shard_big.bin    llm.c uint16 shards of 20000 tokens below 512 (the second holds one
#                                token 1000);
#   empty.txt, ten.txt           an empty file and 10 bytes of text (fewer than one window);
#   params.json                  qwen3-tiny's param list (`canzona plan --dump-params`).
foreach(var OUT CANZONA SPM_TRAIN PYTHON TEXT SHARD_WRITER)
  if(NOT ${var})
    message(FATAL_ERROR "make_data.cmake: -D${var}=... missing")
  endif()
endforeach()
foreach(tool SPM_TRAIN PYTHON)
  if(NOT EXISTS "${${tool}}")
    message(FATAL_ERROR "${tool} '${${tool}}' not found (Debian packages sentencepiece and python3, "
                        "scripts/install-deps.sh)")
  endif()
endforeach()
if(NOT EXISTS "${TEXT}")
  message(FATAL_ERROR "${TEXT} not found (Debian package fortunes, scripts/install-deps.sh)")
endif()
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${OUT}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "'${ARGN}' failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

foreach(vocab 300 600)
  run("${SPM_TRAIN}" "--input=${TEXT}" "--model_prefix=spm${vocab}" "--vocab_size=${vocab}"
      --model_type=bpe --num_threads=1)
endforeach()
run("${PYTHON}" "${SHARD_WRITER}" "${OUT}/shard.bin" 20000 512)
run("${PYTHON}" "${SHARD_WRITER}" "${OUT}/shard_big.bin" 20000 512 1000)
file(WRITE "${OUT}/empty.txt" "")
file(WRITE "${OUT}/ten.txt" "abcdefghij")
run("${CANZONA}" plan --model qwen3-tiny --dump-params "${OUT}/params.json")
foreach(f spm300.model spm600.model shard.bin shard_big.bin empty.txt ten.txt params.json)
  if(NOT EXISTS "${OUT}/${f}")
    message(FATAL_ERROR "make_data.cmake: ${OUT}/${f} was not written")
  endif()
endforeach()
message("train_cli data in ${OUT}")
