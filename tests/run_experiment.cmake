# run_experiment.cmake - one experiments/*.json as a ctest case:
#   cmake -DBIN=chaosloco -DEXP=file.json -DOUT=dir -P run_experiment.cmake
# Starts from an empty run directory (`chaosloco run --out` refuses one that
# already holds a run) and fails unless `chaosloco run --ci` exits 0.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${BIN} run --ci ${EXP} --out ${OUT} --time-limit 240 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "chaosloco run --ci ${EXP} exited ${rc} (0 wanted); see ${OUT}/journal.json, ${OUT}/logs/")
endif()
