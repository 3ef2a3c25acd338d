# run_experiment_deviates.cmake - an experiment built to deviate, as a ctest case:
#   cmake -DBIN=chaosloco -DEXP=file.json -DOUT=dir -DEXPECT=text -P run_experiment_deviates.cmake
# Passes only when `chaosloco run --ci` exits 1 (a hypothesis deviated, the
# run itself completed) and junit.xml carries a <failure> whose message
# contains EXPECT: the check that a verdict really depends on what it judges.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${BIN} run --ci ${EXP} --out ${OUT} --time-limit 240 RESULT_VARIABLE rc)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "chaosloco run --ci ${EXP} exited ${rc} (1 wanted: deviated); see ${OUT}/journal.json, ${OUT}/logs/")
endif()
file(READ ${OUT}/junit.xml junit)
string(FIND "${junit}" "<failure" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${OUT}/junit.xml has no <failure>")
endif()
string(SUBSTRING "${junit}" ${at} -1 failures)
string(FIND "${failures}" "${EXPECT}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "${OUT}/junit.xml: no failure says \"${EXPECT}\"")
endif()
