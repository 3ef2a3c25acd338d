# cmake -DBIN=chaosloco -DSRC=<source dir> -DSCRIPT=claims|parity -DOUT=<dir> [-DARGS=a;b] -P run_claims.cmake
# Runs `bench/SCRIPT --short [ARGS...]` into a fresh OUT and fails unless it exits 0.
foreach(v BIN SRC SCRIPT OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_claims.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env CHAOSLOCO_BIN=${BIN} ${SRC}/bench/${SCRIPT} --short ${ARGS} --out ${OUT}
  WORKING_DIRECTORY ${SRC}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench/${SCRIPT} --short ${ARGS} exited ${rc}; see ${OUT} and the output above")
endif()
