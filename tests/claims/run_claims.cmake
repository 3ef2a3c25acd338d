# cmake -DBIN=chaosloco -DSRC=<source dir> -DOUT=<dir> -P run_claims.cmake
# Runs `bench/claims --short` into a fresh OUT and fails unless it exits 0.
foreach(v BIN SRC OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_claims.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env CHAOSLOCO_BIN=${BIN} ${SRC}/bench/claims --short --out ${OUT}
  WORKING_DIRECTORY ${SRC}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench/claims --short exited ${rc}; see ${OUT} and the output above")
endif()
