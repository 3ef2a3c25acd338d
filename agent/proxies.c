/* proxies.c - the agent's proxy table: the --proxy proxies (fixed) and the
 * ones created through the Toxiproxy API (dynamic, borrowed with a
 * reference count so that a DELETE never frees one another thread still
 * uses). See agent.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/err.h"

proxy *agent_proxy(agent *a, const char *name)
{
    for (int i = 0; i < a->nproxies; i++)
        if (strcmp(proxy_name(a->proxies[i]), name) == 0)
            return a->proxies[i];
    return NULL;
}

agent_px *agent_px_get(agent *a, const char *name)
{
    for (int i = 0; i < a->nproxies; i++)
        if (strcmp(proxy_name(a->proxies[i]), name) == 0)
            return &a->fixed_px[i];
    pthread_mutex_lock(&a->px_lock);
    agent_px *x = a->dyn;
    while (x && !(x->listed && strcmp(proxy_name(x->p), name) == 0))
        x = x->next;
    if (x)
        x->refs++;
    pthread_mutex_unlock(&a->px_lock);
    return x;
}

void agent_px_put(agent *a, agent_px *x)
{
    if (!x || x->fixed)
        return;
    pthread_mutex_lock(&a->px_lock);
    int last = --x->refs == 0;
    if (last) {
        agent_px **pp = &a->dyn;
        while (*pp && *pp != x)
            pp = &(*pp)->next;
        if (*pp)
            *pp = x->next;
    }
    pthread_mutex_unlock(&a->px_lock);
    if (last) {
        proxy_free(x->p); /* joins its loop thread: bounded, no lock held */
        free(x);
    }
}

int agent_px_list(agent *a, agent_px **out, int max)
{
    int n = 0;
    for (int i = 0; i < a->nproxies && n < max; i++)
        out[n++] = &a->fixed_px[i];
    pthread_mutex_lock(&a->px_lock);
    for (agent_px *x = a->dyn; x && n < max; x = x->next)
        if (x->listed) {
            x->refs++;
            out[n++] = x;
        }
    pthread_mutex_unlock(&a->px_lock);
    return n;
}

int agent_px_add(agent *a, proxy *p, char *err, size_t errlen)
{
    if (agent_proxy(a, proxy_name(p)))
        return cx_fail(err, errlen, CX_ECONFLICT, "proxy already exists");
    agent_px *x = calloc(1, sizeof *x);
    if (!x)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    x->p = p;
    x->refs = 1;
    x->listed = 1;
    pthread_mutex_lock(&a->px_lock);
    int n = 0, taken = 0;
    agent_px **pp = &a->dyn;
    for (; *pp; pp = &(*pp)->next) {
        n += (*pp)->listed;
        taken |= (*pp)->listed && strcmp(proxy_name((*pp)->p), proxy_name(p)) == 0;
    }
    if (!taken && n < AGENT_MAX_DYN_PROXIES)
        *pp = x;
    pthread_mutex_unlock(&a->px_lock);
    if (taken || n >= AGENT_MAX_DYN_PROXIES) {
        free(x);
        return taken ? cx_fail(err, errlen, CX_ECONFLICT, "proxy already exists")
                     : cx_fail(err, errlen, CX_ETOOBIG,
                               "at most %d proxies can be created through the "
                               "Toxiproxy API",
                               AGENT_MAX_DYN_PROXIES);
    }
    return 0;
}

int agent_px_remove(agent *a, const char *name)
{
    pthread_mutex_lock(&a->px_lock);
    agent_px *x = a->dyn;
    while (x && !(x->listed && strcmp(proxy_name(x->p), name) == 0))
        x = x->next;
    if (x)
        x->listed = 0;
    pthread_mutex_unlock(&a->px_lock);
    if (!x)
        return CX_ENOTFOUND;
    agent_px_put(a, x); /* the list's reference */
    return 0;
}
