/* file.h - durable files: atomic replace and checksummed blobs.
 */
#ifndef CX_FILE_H
#define CX_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Write data to path atomically: temp file in the same directory, fsync,
 * rename over path, fsync the directory. Never leaves a partial path. */
int cx_file_write_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* The same with the file's mode from its creation on (e.g. 0600 for a
 * secret: no moment at which another user could open it). */
int cx_file_write_atomic_mode(const char *path, const void *data, size_t len, unsigned mode, char *err,
                              size_t errlen);

/* Create path (never an existing file or a symlink: O_EXCL, O_NOFOLLOW)
 * with mode from its first byte, write data, fsync. An existing path is
 * CX_ECONFLICT and stays as it was; on any other failure the new file is
 * removed. Errors read "<what> <path>: <reason>" (what: "credential
 * file", ...). For secrets written once, e.g. by `chaosloco secrets`. */
int cx_file_write_new(const char *what, const char *path, const void *data, size_t len, unsigned mode, char *err,
                      size_t errlen);

/* Remove the temp files a crash in cx_file_write_atomic left beside path:
 * "<path>.tmp.<PID>" where PID is no running process, or is this process
 * (call it before this process writes path, e.g. at start: PIDs repeat
 * across restarts in containers). A temp file of another live process is
 * left alone. Returns the number removed (>= 0) or a negative CX_E* when
 * the directory cannot be read. */
int cx_file_remove_stale_tmp(const char *path, char *err, size_t errlen);

/* Read a whole file into a malloc'd buffer (NUL-terminated; *len excludes
 * the NUL). Fails with CX_ETOOBIG over max bytes. */
int cx_file_read(const char *path, size_t max, char **data, size_t *len, char *err, size_t errlen);

/* A checksummed blob: "CXBL" magic, u32 format version, u64 length,
 * payload, u32 CRC32C of the payload. write_blob is atomic; read_blob
 * returns CX_ECORRUPT on a bad magic, length or checksum. */
int cx_file_write_blob(const char *path, const void *payload, size_t len, char *err, size_t errlen);
int cx_file_read_blob(const char *path, size_t max, void **payload, size_t *len, char *err, size_t errlen);

/* mkdir -p. */
int cx_mkdir_p(const char *path, char *err, size_t errlen);

#endif
