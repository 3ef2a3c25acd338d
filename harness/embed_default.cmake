# embed_default.cmake - build step: experiments/kill-one-reintegrate.json
# becomes the C string `chaosloco run` runs with no experiment, so the file
# in experiments/ is the one and only copy of the default.
#   cmake -DIN=file.json -DOUT=file.c -P embed_default.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," arr "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " arr "${arr}")
file(WRITE "${OUT}.tmp"
"/* generated from ${IN} by harness/embed_default.cmake - do not edit */
#include \"harness/run.h\"

static const char default_experiment[] = {
    ${arr}0x00};

const char *run_default_experiment(void)
{
    return default_experiment;
}
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
