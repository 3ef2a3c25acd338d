/* sup_group.c - the unit's process group: its watchdog (a forked child
 * that SIGKILLs the group and empties its cgroup when the agent dies),
 * <state>/unit.json for the next agent's sweep, and draining the members
 * that outlive the leader (SIGTERM, group_grace_ms, SIGKILL). Part of the
 * supervisor (supervisor.h, sup_internal.h; the notes and the state
 * machine are at the top of supervisor.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/sup_internal.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "common/log.h"
#include "common/proc.h"
#include "injectors/unit_proc.h"

/* ---- supervisor: the group, its watchdog and unit.json ---- */

/* The watchdog child (see the notes at the top of supervisor.c): fork()ed
 * from a threaded process, so async-signal-safe calls only. */
static void watchdog_main(int fd, pid_t pgid, long maxfd, const cg_kill_spec *cg)
{
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    /* Hold nothing of the agent's: no listening socket, no log pipe. */
    int devnull = open("/dev/null", O_RDWR);
    for (int i = 0; i < 3 && devnull >= 0; i++)
        dup2(devnull, i);
    int closed = 0;
#ifdef SYS_close_range
    closed = (fd == 3 || syscall(SYS_close_range, 3U, (unsigned)fd - 1, 0U) == 0) &&
             syscall(SYS_close_range, (unsigned)fd + 1, ~0U, 0U) == 0;
#endif
    for (long i = 3; !closed && i < maxfd; i++)
        if (i != fd)
            close((int)i);
    for (;;) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r == 1)
            _exit(CX_EXIT_OK); /* the supervisor is done with the group */
        if (r < 0 && errno == EINTR)
            continue;
        break; /* end of file: the agent is gone */
    }
    /* now, in /proc start-time ticks: the cgroup rounds below spare what
     * starts later (the next agent's unit joins the same cgroup) */
    struct timespec now;
    uint64_t started_by = 0;
    if (cg->procs[0] && cg->clk_tck > 0 && clock_gettime(CLOCK_BOOTTIME, &now) == 0)
        started_by = (uint64_t)now.tv_sec * (uint64_t)cg->clk_tck +
                     (uint64_t)now.tv_nsec / (1000000000ULL / (uint64_t)cg->clk_tck);
    kill(-pgid, SIGKILL);
    /* a unit frozen by a pause fault acts on its SIGKILL only once thawed
     * (no agent is left to revert the pause) */
    cg_kill_spec_thaw(cg);
    /* what left the group but not the cgroup; again while some are left
     * (one may fork meanwhile), bounded at ~1 s */
    for (int round = 0; cg->procs[0] && round < 100 && cg_kill_spec_signal(cg, SIGKILL, started_by) > 0;
         round++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    _exit(CX_EXIT_OK);
}

void sup_watchdog_start(sup *s, pid_t pgid)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        cx_warn("supervisor: no watchdog for group %d: socketpair: %s", (int)pgid, strerror(errno));
        return;
    }
    long maxfd = sysconf(_SC_OPEN_MAX); /* before fork: not async-signal-safe */
    if (maxfd < 1024 || maxfd > 1048576)
        maxfd = maxfd < 1024 ? 1024 : 1048576;
    pid_t w = fork();
    if (w == 0)
        watchdog_main(sv[1], pgid, maxfd, &s->cg_kill);
    int e = errno;
    close(sv[1]);
    if (w < 0) {
        cx_warn("supervisor: no watchdog for group %d: fork: %s", (int)pgid, strerror(e));
        close(sv[0]);
        return;
    }
    s->wd_pid = w;
    s->wd_fd = sv[0];
}

void sup_watchdog_stop(sup *s)
{
    if (s->wd_fd >= 0) {
        ssize_t w = send(s->wd_fd, "q", 1, MSG_NOSIGNAL);
        (void)w; /* a watchdog that is gone already needs no word */
        close(s->wd_fd);
        s->wd_fd = -1;
    }
    if (s->wd_pid > 0) {
        if (cx_wait_timeout(s->wd_pid, 2000, NULL) == CX_ETIMEDOUT) {
            kill(s->wd_pid, SIGKILL);
            cx_wait_timeout(s->wd_pid, 2000, NULL);
        }
        s->wd_pid = 0;
    }
}

void sup_unit_file_write(sup *s, pid_t pid)
{
    if (!s->unit_file)
        return;
    char text[160], err[CX_ERRLEN] = "";
    int n = snprintf(text, sizeof text, "{\"pgid\": %d, \"pid\": %d, \"starttime\": %llu}\n", (int)pid,
                     (int)pid, (unsigned long long)uproc_starttime(pid));
    if (cx_file_write_atomic(s->unit_file, text, (size_t)n, err, sizeof err) < 0)
        cx_warn("supervisor: %s (a crash now would leave group %d to its watchdog alone)", err, (int)pid);
}

/* Live members of group pgid other than a zombie leader (0 when /proc
 * cannot be read: nothing more can be done then). */
int sup_group_left(pid_t pgid)
{
    int n = uproc_group_members(pgid, NULL, 0);
    return n > 0 ? n : 0;
}

/* 1 when the leader pid has exited (not reaped: WNOWAIT), 0 when it runs,
 * -1 when it is not our child any more (reaped elsewhere). */
int sup_leader_exited(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD ? -1 : 0;
    return si.si_pid == pid;
}

/* The leader exited: 1 once no member of its group is left (after SIGTERM,
 * group_grace_ms and SIGKILL for those that outlive it), 0 while they get
 * their grace. Lock held. */
int sup_group_drained(sup *s, int64_t now)
{
    int left = sup_group_left(s->pid);
    if (left == 0)
        return 1;
    if (s->drain_until_ms == 0) {
        kill(-s->pid, SIGCONT);
        kill(-s->pid, SIGTERM);
        s->drain_until_ms = now + s->group_grace_ms;
        cx_warn(
            "unit leader pid=%d exited, %d process(es) of its group still run: SIGTERM, SIGKILL in %lld ms",
            (int)s->pid, left, (long long)s->group_grace_ms);
        return 0;
    }
    if (now < s->drain_until_ms)
        return 0;
    kill(-s->pid, SIGKILL);
    cx_warn("unit group %d: %d process(es) outlived the %lld ms grace: SIGKILL", (int)s->pid, left,
            (long long)s->group_grace_ms);
    for (int i = 0; i < 400 && sup_group_left(s->pid) > 0; i++)
        cx_sleep_ms(5);
    return 1;
}

/* The group of dead_pid is done (its leader reaped): release its watchdog
 * and, when nothing of it is left, its unit.json. Lock held. */
void sup_group_finish(sup *s, pid_t dead_pid)
{
    s->drain_until_ms = 0;
    sup_watchdog_stop(s);
    int left = sup_group_left(dead_pid);
    if (left > 0)
        cx_error("unit group %d: %d process(es) survive SIGKILL; %s kept for the next sweep", (int)dead_pid,
                 left, s->unit_file ? s->unit_file : "no unit file");
    else if (s->unit_file && unlink(s->unit_file) != 0 && errno != ENOENT)
        cx_warn("supervisor: unlink %s: %s", s->unit_file, strerror(errno));
}
