/* support.h - helpers for integration tests: start real chaosloco processes
 * on 127.0.0.1, wait for them to listen, talk JSON to them, and always clean
 * up. Every process started here is SIGKILLed (with its process group) by
 * it_cleanup(), which also runs at exit, so a failing test leaves nothing
 * behind.
 */
#ifndef IT_SUPPORT_H
#define IT_SUPPORT_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

/* The chaosloco binary the tests start: this build's (CHAOSLOCO_BIN_BUILT),
 * unless CHAOSLOCO_IT_BIN names another one. scripts/tsan runs these tests
 * against the ThreadSanitizer build that way (Criterion itself cannot run
 * under TSan: Snaipe/Criterion#274). Every test says CHAOSLOCO_BIN. */
const char *it_bin(void);
#undef CHAOSLOCO_BIN
#define CHAOSLOCO_BIN it_bin()

/* Syncer flags of the tests that need a fast model and a corpus with a known
 * entropy floor rather than the defaults (gpt on fortunes): the MLP on the
 * synthetic Markov corpus. Later flags still override. */
#define IT_MLP "--model", "mlp", "--data", "synthetic"

/* A fresh temporary directory (malloc'd path; caller frees). */
char *it_mkdtemp(const char *tag);
/* Start CHAOSLOCO_BIN with args (NULL-terminated, without argv[0]) in its
 * own process group; stdout+stderr go to <dir>/<name>.log. extra_env:
 * NULL-terminated "K=V" list or NULL. Returns the pid (> 0). */
pid_t it_start(const char *dir, const char *name, const char *const *args, const char *const *extra_env);
/* Start any program (argv[0] looked up in PATH), same rules. */
pid_t it_start_prog(const char *dir, const char *name, const char *const *argv, const char *const *extra_env);
/* Wait up to timeout_ms for <state_dir>/listen.addr; copy "HOST:PORT". 0 ok. */
int it_wait_addr(const char *state_dir, char *out, size_t len, long timeout_ms);
/* One HTTP call; body may be NULL; returns the parsed JSON answer (new
 * reference) or NULL, and the status in *status (0 if no answer). token may
 * be NULL. */
json_t *it_http_json(const char *method, const char *url, json_t *body, const char *token, int *status);
/* Signal a started process (its group when group != 0). */
void it_signal(pid_t pid, int sig, int group);
/* Wait up to timeout_ms for pid to exit; returns its wait status or -1. */
int it_wait_exit(pid_t pid, long timeout_ms);
/* Print the tail of <dir>/<name>.log to stderr (for failing tests). */
void it_dump_log(const char *dir, const char *name);
/* Kill every process started by it_start*, reap them. Idempotent. */
void it_cleanup(void);

/* ---- processes seen through /proc ---- */
/* (A state letter or a parent: uproc_state, uproc_ppid of
 * injectors/unit_proc.h.) */

/* 1 when pid is gone or a zombie (killed; its new parent may reap late). */
int it_proc_dead(pid_t pid);
/* Wait up to timeout_ms until it_proc_dead(pid); its value then. */
int it_wait_proc_dead(pid_t pid, long timeout_ms);
/* The pid written in <dir>/<name> (its first line), waited for up to
 * timeout_ms; 0 on time-out. */
pid_t it_wait_pid_file(const char *dir, const char *name, long timeout_ms);

/* ---- files ---- */

/* Remove dir and everything below it (no symlink is followed); errors
 * are ignored (the test's own assertions say what must be gone). */
void it_rm_tree(const char *dir);

#endif
