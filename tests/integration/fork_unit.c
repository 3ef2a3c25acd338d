/* fork_unit.c - the unit test_agent_fork.c supervises: a leader that forks
 * a child which keeps running after the leader is gone (as a learner
 * started through a wrapper would), no shell involved.
 *
 *   fork_unit DIR [with-decoy]   leader: writes DIR/prev.state (the /proc
 *                                state letter of the pid in DIR/child.pid
 *                                left by the previous incarnation, "gone"
 *                                when there is none), forks the child
 *                                (ignores SIGTERM, writes DIR/child.pid)
 *                                and, with with-decoy, a decoy; then waits
 *                                for a signal
 *   fork_unit DIR decoy          the decoy: re-executed with an empty
 *                                environment (so without the agent's
 *                                marks), in the same process group; writes
 *                                DIR/decoy.pid and waits
 *   fork_unit DIR escape         leader: as without a mode, plus a double
 *                                fork whose grandchild calls setsid() (it
 *                                leaves the unit's process group and
 *                                session, as a daemonizing wrapper does),
 *                                ignores SIGTERM, writes DIR/escaped.pid
 *                                and waits
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

static void write_pid(const char *dir, const char *name)
{
    char text[32];
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    write_file(dir, name, text);
}

/* The state letter of the previous child, or "gone". */
static void record_previous(const char *dir)
{
    char path[4096], stat[512], state[8] = "gone";
    snprintf(path, sizeof path, "%s/child.pid", dir);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    if (pid > 0) {
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        f = fopen(path, "r");
        if (f) {
            size_t n = fread(stat, 1, sizeof stat - 1, f);
            fclose(f);
            stat[n] = '\0';
            char *rp = strrchr(stat, ')');
            if (rp && rp[1] == ' ' && rp[2])
                snprintf(state, sizeof state, "%c", rp[2]);
        }
    }
    write_file(dir, "prev.state", state);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fork_unit DIR [with-decoy|decoy]\n");
        return 2;
    }
    const char *dir = argv[1];
    if (argc > 2 && strcmp(argv[2], "decoy") == 0) {
        write_pid(dir, "decoy.pid");
        for (;;)
            pause();
    }
    record_previous(dir);
    pid_t c = fork();
    if (c == 0) {
        signal(SIGTERM, SIG_IGN); /* a child busy flushing: only SIGKILL ends it */
        write_pid(dir, "child.pid");
        for (;;)
            pause();
    }
    if (argc > 2 && strcmp(argv[2], "escape") == 0) {
        pid_t mid = fork();
        if (mid == 0) {
            if (fork() == 0) {
                setsid();
                signal(SIGTERM, SIG_IGN);
                write_pid(dir, "escaped.pid");
                for (;;)
                    pause();
            }
            _exit(0); /* the grandchild is reparented: only its cgroup ties it to the unit */
        }
    }
    if (argc > 2 && strcmp(argv[2], "with-decoy") == 0 && fork() == 0) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = '\0';
            char *args[] = {self, (char *)dir, "decoy", NULL};
            char *none[] = {NULL};
            execve(self, args, none);
        }
        _exit(127);
    }
    for (;;)
        pause();
}
