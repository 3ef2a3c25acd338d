# Every library comes from Debian's packages through pkg-config.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# GnuTLS is libmicrohttpd's TLS (libmicrohttpd-dev depends on it); the
# trainer uses its HMAC-SHA256 for the syncer's fragment seals (trainer/seal.h).
pkg_check_modules(GNUTLS REQUIRED IMPORTED_TARGET gnutls)
if(CHAOSLOCO_TESTS)
  pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)
endif()
