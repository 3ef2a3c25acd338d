/* secret.h - open and read a secret file: a credential, a bearer token, a
 * TLS private key. The one rule every such file passes, wherever it comes
 * from (an operator's chmod 600 file, a run directory, a Kubernetes Secret
 * volume).
 *
 * The contract. The path is opened following symlinks to its final target
 * (a kubelet mounts each Secret key as NAME -> ..data/NAME with
 * ..data -> ..<timestamp>/, and swaps ..data atomically on an update), and
 * what was opened is then checked with fstat on the descriptor, so a file
 * swapped between check and read is never the one used:
 *   - a regular file (not a directory, FIFO, socket or device; a FIFO is
 *     opened non-blocking so the open itself cannot hang);
 *   - owned by the effective uid of this process or by root. Root is
 *     accepted because a kubelet writes Secret files as root, and only root
 *     can have written a root-owned file; any other owner could have put
 *     anything in it;
 *   - no permission bit for group or others (0600 or 0400). A Secret
 *     volume with fsGroup makes its files group readable: those are
 *     refused (copy them into an emptyDir with an init container).
 * A refusal names the path, the target it resolved to when that differs,
 * and what was wrong. What it is not: a parser of what the file holds
 * (trainer/credential.h checks credentials), nor a writer.
 */
#ifndef CX_SECRET_H
#define CX_SECRET_H

#include <stddef.h>

/* Open path read-only under the rule above. *fd (O_CLOEXEC, the caller
 * closes it) on success. On failure CX_EINVAL (refused, or cannot be
 * opened) or CX_EIO (fstat failed), with err "WHAT PATH[ (-> TARGET)]:
 * why"; `what` names the file's role ("credential file", "--token-file"). */
int cx_secret_open(const char *path, const char *what, int *fd, char *err, size_t errlen);

/* cx_secret_open, then read the whole file: *out is malloc'd and
 * NUL-terminated, *len its length (at most max bytes; a larger file is
 * CX_EINVAL, bad input like any other refusal). The caller wipes and frees *out. CX_ENOMEM, CX_EIO (read)
 * otherwise; *out is NULL on failure. */
int cx_secret_read(const char *path, const char *what, size_t max, char **out, size_t *len, char *err,
                   size_t errlen);

/* cx_secret_read of a token file (at most 4096 bytes), then its first line
 * without trailing whitespace into out (outlen bytes, NUL-terminated): its
 * length (0 for an empty line: the caller decides), or a negative cx_err
 * with err; a line of outlen bytes or more is CX_EINVAL naming what and
 * path. What was read is wiped. */
int cx_secret_read_line(const char *path, const char *what, char *out, size_t outlen, char *err, size_t errlen);

#endif
