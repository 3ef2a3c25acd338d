# run_experiment.cmake - one experiments/*.json as a ctest case:
#   cmake -DBIN=chaosloco -DEXP=file.json -DOUT=dir [-DVALIDATE=cmd|args] -P run_experiment.cmake
# Starts from an empty run directory (`chaosloco run --out` refuses one that
# already holds a run) and fails unless `chaosloco run --ci` exits 0 and,
# with VALIDATE (the journal validator's command line, '|'-separated), its
# journal.json validates against docs/journal.schema.json.
file(REMOVE_RECURSE ${OUT})
# The run's time bound: 240 s, times CHAOSLOCO_SLOWDOWN when the learners are
# slowed (the horizon is in tokens, so a slower machine trains longer).
set(time_limit 240)
if(DEFINED ENV{CHAOSLOCO_SLOWDOWN} AND "$ENV{CHAOSLOCO_SLOWDOWN}" MATCHES "^[0-9]+$")
  math(EXPR time_limit "240 * $ENV{CHAOSLOCO_SLOWDOWN}")
endif()
# CHAOSLOCO_TIME_LIMIT_S overrides it (scripts/test's CPU-hog pass: 720 s).
if(DEFINED ENV{CHAOSLOCO_TIME_LIMIT_S} AND "$ENV{CHAOSLOCO_TIME_LIMIT_S}" MATCHES "^[0-9]+$")
  set(time_limit $ENV{CHAOSLOCO_TIME_LIMIT_S})
endif()
# stderr is echoed as it comes and kept: a run that cannot make network
# namespaces here (topology.network kind netns without root or iproute2)
# exits 3 with "network namespaces unavailable: <why>", and the case is
# skipped with that reason (the experiment tests' SKIP_REGULAR_EXPRESSION).
execute_process(COMMAND ${BIN} run --ci ${EXP} --out ${OUT} --time-limit ${time_limit} RESULT_VARIABLE rc
  ERROR_VARIABLE run_err ECHO_ERROR_VARIABLE)
if(rc EQUAL 3 AND run_err MATCHES "network namespaces unavailable: ([^\n]*)")
  message("CHAOSLOCO-SKIP: ${EXP} needs network namespaces: ${CMAKE_MATCH_1}")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "chaosloco run --ci ${EXP} exited ${rc} (0 wanted); see ${OUT}/journal.json, ${OUT}/logs/")
endif()
# A run in network namespaces leaves none of them, nor its root link.
if(EXISTS ${OUT}/network.json)
  file(READ ${OUT}/network.json net)
  if(NOT net MATCHES "\"prefix\": \"(cl[0-9]+)\"")
    message(FATAL_ERROR "${OUT}/network.json has no prefix")
  endif()
  set(prefix ${CMAKE_MATCH_1})
  file(GLOB left /run/netns/${prefix}-*)
  if(left OR EXISTS /sys/class/net/${prefix}-h)
    message(FATAL_ERROR "the run left namespaces or links behind: ${left} /sys/class/net/${prefix}-h")
  endif()
endif()
if(VALIDATE)
  string(REPLACE "|" ";" validate_cmd "${VALIDATE}")
  execute_process(COMMAND ${validate_cmd} ${OUT}/journal.json RESULT_VARIABLE vrc)
  if(NOT vrc EQUAL 0)
    message(FATAL_ERROR "${OUT}/journal.json does not validate against docs/journal.schema.json (exit ${vrc})")
  endif()
endif()
