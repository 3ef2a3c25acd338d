#!/usr/bin/env python3
"""tests/deploy/kubelet_plan.py - what a kubelet would do with deploy/k8s/,
written down for tests/deploy/kubelet_run.sh to execute.

    kubelet_plan.py K8S_DIR SECRETS_DIR STATE_DIR SUBNET_PREFIX [--short]

Reads every manifest of K8S_DIR (JSON, one object per file) and the Secret
objects `chaosloco secrets --out SECRETS_DIR` wrote, makes each pod a
workload controller would create (a StatefulSet's `replicas` pods named
NAME-<i> with the pod-index label, a Deployment's and a Job's one pod) and,
per pod, under STATE_DIR/pods/POD/:

  * its volumes, as kubelet lays them out: Secret and ConfigMap volumes in
    the atomic-writer layout (KEY -> ..data/KEY, ..data -> ..<timestamp>/,
    file modes from defaultMode/items[].mode, owner root, group fsGroup
    with the read bits kubelet's SetVolumeOwnership adds), emptyDir as a
    0777 directory (medium Memory: a tmpfs with its sizeLimit), a
    PersistentVolumeClaim (or a StatefulSet's claim template) as a root
    0755 directory made group-writable and setgid for fsGroup;
  * one launcher script per container (init containers numbered first):
    it runs in the pod's network and UTS namespace, in a mount namespace of
    its own, binds the container's volumeMounts (readOnly honoured) and
    /etc/hosts, makes the rest of the file system read-only when
    readOnlyRootFilesystem says so, and execs the command + args, with
    Kubernetes $(VAR) expansion, under the pod's runAsUser/runAsGroup/
    fsGroup with no_new_privs and no capabilities, in an environment of the
    image's PATH, HOSTNAME and the container's env (value, fieldRef on
    metadata.name/namespace/labels/annotations, status.podIP, spec.nodeName,
    secretKeyRef, configMapKeyRef);
  * `restart` (the pod's restartPolicy), `probe` (the main containers' readiness probe: http IP PORT PATH, tcp
    IP PORT or none) and `dns` (the /etc/hosts lines the Services add once
    the pod is ready: headless service -> hostname.subdomain per pod, a
    ClusterIP service's name -> this pod's address, there being no
    kube-proxy).

STATE_DIR/pods.txt lists `POD IP ORDER KIND` in creation order. With
--short the syncer gets the CI model's training flags appended (see
kubelet_run.sh); the manifests are not changed. Anything the emulation does not know (a volume or env
source kind, a missing Secret key) is an error naming the object and field:
exit 1.
"""
import base64
import json
import os
import shlex
import subprocess
import sys
import time

NAMESPACE = "default"
DOMAIN = "svc.cluster.local"
IMAGE_PATH_DIRS = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# --short: the experiments' CI model (as tests/slurm/slurm_cluster.sh gives
# the sbatch), flags appended to the syncer's args (later flags win); steps
# enough that the harness's horizon (every window closed), not the learners'
# last step, ends the run
SHORT_SYNCER_FLAGS = ["--steps", "8000", "--eval-every-ms", "500", "--learner-checkpoint-every", "100",
                      "--context", "32", "--embed", "32", "--hidden", "128", "--layers", "2",
                      "--heads", "2", "--inner-lr", "0.008", "--eval-tokens", "512"]


def die(msg):
    print("kubelet_plan: " + msg, file=sys.stderr)
    sys.exit(1)


def expand(s, env):
    """Kubernetes $(VAR) expansion: $(NAME) -> value when NAME is defined,
    left as written otherwise; $$ -> $ (so $$(NAME) stays literal)."""
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "$" and i + 1 < len(s):
            n = s[i + 1]
            if n == "$":
                out.append("$")
                i += 2
                continue
            if n == "(":
                j = s.find(")", i + 2)
                if j > 0:
                    name = s[i + 2:j]
                    out.append(env[name] if name in env else s[i:j + 1])
                    i = j + 1
                    continue
        out.append(c)
        i += 1
    return "".join(out)


def field_ref(path, pod, where):
    meta = pod["meta"]
    for prefix, d in (("metadata.labels", meta["labels"]), ("metadata.annotations", meta["annotations"])):
        if path.startswith(prefix + "['") and path.endswith("']"):
            key = path[len(prefix) + 2:-2]
            return d.get(key, "")
    simple = {"metadata.name": meta["name"], "metadata.namespace": NAMESPACE,
              "status.podIP": pod["ip"], "spec.nodeName": "node-" + meta["name"],
              "metadata.uid": "uid-" + meta["name"], "spec.serviceAccountName": "default"}
    if path not in simple:
        die("%s: fieldRef.fieldPath '%s' is not one this emulation knows" % (where, path))
    return simple[path]


def container_env(c, pod, secrets, configmaps, where):
    env = {"PATH": pod["path"], "HOSTNAME": pod["meta"]["name"], "HOME": "/"}
    for e in c.get("env", []):
        w = "%s.env[%s]" % (where, e.get("name"))
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
            continue
        vf = e.get("valueFrom", {})
        if "fieldRef" in vf:
            env[e["name"]] = field_ref(vf["fieldRef"]["fieldPath"], pod, w)
        elif "secretKeyRef" in vf:
            r = vf["secretKeyRef"]
            v = secrets.get(r["name"], {}).get(r["key"])
            if v is None:
                die("%s: Secret %s has no key %s" % (w, r["name"], r["key"]))
            env[e["name"]] = v.decode()
        elif "configMapKeyRef" in vf:
            r = vf["configMapKeyRef"]
            v = configmaps.get(r["name"], {}).get(r["key"])
            if v is None:
                die("%s: ConfigMap %s has no key %s" % (w, r["name"], r["key"]))
            env[e["name"]] = v.decode()
        else:
            die("%s: valueFrom %s is not one this emulation knows" % (w, list(vf)))
    return env


def chown_fsgroup(path, fs_group, dir_mask, file_mask):
    """kubelet's SetVolumeOwnership: group fsGroup, the mask's bits added,
    setgid on directories; symlinks untouched."""
    for root, dirs, files in os.walk(path):
        for p in [root] + [os.path.join(root, f) for f in files]:
            if os.path.islink(p):
                continue
            st = os.lstat(p)
            os.lchown(p, -1, fs_group)
            if os.path.isdir(p):
                os.chmod(p, (st.st_mode & 0o7777) | dir_mask | 0o2000)
            else:
                os.chmod(p, (st.st_mode & 0o7777) | file_mask)


def atomic_writer(path, payload, fs_group):
    """payload: {relpath: (bytes, mode)} written as kubelet's AtomicWriter does."""
    os.makedirs(path)
    os.chmod(path, 0o1777)
    ts = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + "%09d" % (time.time_ns() % 10 ** 9)
    tsdir = os.path.join(path, ts)
    os.mkdir(tsdir)
    os.chmod(tsdir, 0o755)
    for rel, (data, mode) in payload.items():
        f = os.path.join(tsdir, rel)
        os.makedirs(os.path.dirname(f), exist_ok=True)
        with open(f, "wb") as fh:
            fh.write(data)
        os.chmod(f, mode)
    os.symlink(ts, os.path.join(path, "..data"))
    for rel in sorted({r.split("/")[0] for r in payload}):
        os.symlink(os.path.join("..data", rel), os.path.join(path, rel))
    if fs_group is not None:
        chown_fsgroup(path, fs_group, 0o550, 0o440)


def make_volume(v, pod, sdir, secrets, configmaps, fs_group, where):
    path = os.path.join(sdir, "vol", v["name"])
    w = "%s.volumes[%s]" % (where, v["name"])
    if "secret" in v or "configMap" in v:
        src = v.get("secret") or v.get("configMap")
        name = src.get("secretName") or src.get("name")
        store = secrets if "secret" in v else configmaps
        if name not in store:
            die("%s: %s %s does not exist (kubelet would wait for it)"
                % (w, "Secret" if "secret" in v else "ConfigMap", name))
        data = store[name]
        mode = src.get("defaultMode", 0o644)
        items = src.get("items") or [{"key": k, "path": k} for k in sorted(data)]
        payload = {}
        for it in items:
            if it["key"] not in data:
                die("%s: key %s not in %s" % (w, it["key"], name))
            payload[it["path"]] = (data[it["key"]], it.get("mode", mode))
        atomic_writer(path, payload, fs_group)
    elif "emptyDir" in v:
        os.makedirs(path)
        ed = v["emptyDir"] or {}
        if ed.get("medium") == "Memory":
            size = ed.get("sizeLimit", "64Mi").replace("Mi", "m").replace("Gi", "g")
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0777" % size,
                            "tmpfs", path], check=True)
        os.chmod(path, 0o777)
        if fs_group is not None:
            chown_fsgroup(path, fs_group, 0o770, 0o660)
    elif "persistentVolumeClaim" in v:
        os.makedirs(path)
        os.chmod(path, 0o755)
        if fs_group is not None:
            chown_fsgroup(path, fs_group, 0o770, 0o660)
    else:
        die("%s: volume kind %s is not one this emulation knows" % (w, [k for k in v if k != "name"]))
    return path


def launcher(pod, c, kind_where, env, argv, volpaths, sc, hosts):
    """The bash script that becomes the container (see the module comment)."""
    csc = dict(sc)
    csc.update(c.get("securityContext", {}))
    uid = csc.get("runAsUser", 0)
    gid = csc.get("runAsGroup", uid)
    if csc.get("runAsNonRoot") and uid == 0:
        die("%s: runAsNonRoot without a runAsUser: the image's user is root here" % kind_where)
    groups = [str(g) for g in [pod["fs_group"]] + sc.get("supplementalGroups", []) if g is not None]
    L = ["#!/bin/bash", "set -e", "# %s" % kind_where]
    binds = []
    for m in c.get("volumeMounts", []):
        if m["name"] not in volpaths:
            die("%s: volumeMount %s names no volume of the pod" % (kind_where, m["name"]))
        if m.get("subPath"):
            die("%s: volumeMount %s: subPath is not emulated" % (kind_where, m["name"]))
        binds.append((volpaths[m["name"]], m["mountPath"], m.get("readOnly", False)))
    binds.append((hosts, "/etc/hosts", True))
    for src, dst, ro in binds:
        L.append("mount --bind %s %s" % (shlex.quote(src), shlex.quote(dst)))
        if ro:
            L.append("mount -o remount,bind,ro %s" % shlex.quote(dst))
    if csc.get("readOnlyRootFilesystem"):
        keep = " ".join(shlex.quote(d) for _, d, _ in binds)
        L.append("keep=' %s '" % keep)
        L.append("while read -r _ _ _ _ t _; do")
        L.append("  case $t in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac")
        L.append('  case $keep in *" $t "*) continue ;; esac')
        L.append('  mount -o remount,bind,ro "$t" 2>/dev/null || true')
        L.append("done < <(awk '{print $0}' /proc/self/mountinfo)")
    priv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid]
    priv.append("--groups=%s" % ",".join(groups) if groups else "--clear-groups")
    if csc.get("allowPrivilegeEscalation") is False:
        priv.append("--no-new-privs")
    if "ALL" in csc.get("capabilities", {}).get("drop", []):
        priv += ["--inh-caps=-all", "--bounding-set=-all"]
    envl = ["%s=%s" % kv for kv in env.items()]
    # not the image's: the test's sanitizer settings and one BLAS thread (2 cores)
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "OPENBLAS_NUM_THREADS"):
        if k in os.environ and k not in env:
            envl.append("%s=%s" % (k, os.environ[k]))
    L.append("cd /")
    L.append("exec " + " ".join(shlex.quote(a) for a in priv + ["env", "-i"] + envl + argv))
    return "\n".join(L) + "\n"


def main():
    if len(sys.argv) < 5:
        die("usage: kubelet_plan.py K8S_DIR SECRETS_DIR STATE_DIR SUBNET_PREFIX [--short]")
    kdir, secdir, state, subnet = sys.argv[1:5]
    short = "--short" in sys.argv[5:]
    bindir = os.path.join(state, "bin")
    objs = []
    for f in sorted(os.listdir(kdir)):
        if f.endswith(".json"):
            with open(os.path.join(kdir, f)) as fh:
                objs.append((f, json.load(fh)))
    secrets, configmaps = {}, {}
    for f in sorted(os.listdir(secdir)):
        with open(os.path.join(secdir, f)) as fh:
            o = json.load(fh)
        for s in o.get("items", [o]):
            if s.get("kind") != "Secret":
                continue
            d = {k: base64.b64decode(v) for k, v in s.get("data", {}).items()}
            d.update({k: v.encode() for k, v in s.get("stringData", {}).items()})
            secrets[s["metadata"]["name"]] = d
    for f, o in objs:
        if o["kind"] == "ConfigMap":
            data = o.get("data", {})
            configmaps[o["metadata"]["name"]] = {k: v.encode() for k, v in data.items()}
        elif o["kind"] == "Secret":
            die("%s: a Secret among the manifests (deploy/README.md: they come from chaosloco secrets)" % f)

    # the pods the controllers make, in creation order
    pods = []
    for f, o in objs:
        kind, name, spec = o["kind"], o["metadata"]["name"], o.get("spec", {})
        if kind not in ("StatefulSet", "Deployment", "Job"):
            continue
        tmpl = spec["template"]
        labels = dict(tmpl.get("metadata", {}).get("labels", {}))
        annotations = dict(tmpl.get("metadata", {}).get("annotations", {}))
        if kind == "StatefulSet":
            for i in range(spec.get("replicas", 1)):
                pn = "%s-%d" % (name, i)
                lb = dict(labels, **{"apps.kubernetes.io/pod-index": str(i),
                                     "statefulset.kubernetes.io/pod-name": pn})
                claims = {t["metadata"]["name"]: "%s-%s" % (t["metadata"]["name"], pn)
                          for t in spec.get("volumeClaimTemplates", [])}
                pods.append({"file": f, "kind": kind, "owner": name, "tmpl": tmpl["spec"],
                             "meta": {"name": pn, "labels": lb, "annotations": annotations},
                             "hostname": pn, "subdomain": spec.get("serviceName"), "claims": claims})
        else:
            pn = name + ("-5d8f7c9b6-x2x4q" if kind == "Deployment" else "-k7w2p")
            lb = dict(labels)
            if kind == "Job":
                lb.update({"job-name": name, "batch.kubernetes.io/job-name": name})
            pods.append({"file": f, "kind": kind, "owner": name, "tmpl": tmpl["spec"],
                         "meta": {"name": pn, "labels": lb, "annotations": annotations},
                         "hostname": tmpl["spec"].get("hostname", pn),
                         "subdomain": tmpl["spec"].get("subdomain"), "claims": {}})
    services = [o for _, o in objs if o["kind"] == "Service"]

    os.makedirs(os.path.join(state, "pods"), exist_ok=True)
    hosts = os.path.join(state, "hosts")
    lst = []
    for n, pod in enumerate(pods):
        pod["ip"] = "%s.%d" % (subnet, 10 + n)
        pod["path"] = bindir + ":" + IMAGE_PATH_DIRS
        pn = pod["meta"]["name"]
        where = "%s (%s %s, pod %s)" % (pod["file"], pod["kind"], pod["owner"], pn)
        ps = pod["tmpl"]
        sc = ps.get("securityContext", {})
        pod["fs_group"] = sc.get("fsGroup")
        sdir = os.path.join(state, "pods", pn)
        os.makedirs(sdir)
        volpaths = {}
        for v in ps.get("volumes", []):
            volpaths[v["name"]] = make_volume(v, pod, sdir, secrets, configmaps, pod["fs_group"], where)
        for tname in pod["claims"]:
            v = {"name": tname, "persistentVolumeClaim": {"claimName": pod["claims"][tname]}}
            volpaths[tname] = make_volume(v, pod, sdir, secrets, configmaps, pod["fs_group"], where)
        mountpoints = set()
        probe = "none"
        for idx, (section, c) in enumerate([("init", c) for c in ps.get("initContainers", [])] +
                                           [("main", c) for c in ps["containers"]]):
            cw = "%s container %s" % (where, c["name"])
            env = container_env(c, pod, secrets, configmaps, cw)
            argv = [expand(a, env) for a in c.get("command", []) + c.get("args", [])]
            if not argv:
                die("%s: no command (the image's entrypoint is not emulated)" % cw)
            if section == "main" and pod["kind"] == "Deployment" and short and argv[:2] == ["chaosloco", "syncer"]:
                argv += SHORT_SYNCER_FLAGS
            for m in c.get("volumeMounts", []):
                mountpoints.add(m["mountPath"])
            script = launcher(pod, c, cw, env, argv, volpaths, sc, hosts)
            with open(os.path.join(sdir, "%d-%s-%s.sh" % (idx, section, c["name"])), "w") as fh:
                fh.write(script)
            rp = c.get("readinessProbe")
            if section == "main" and rp:
                ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
                if "httpGet" in rp:
                    port = rp["httpGet"]["port"]
                    port = ports.get(port) if isinstance(port, str) else port
                    if port is None:
                        die("%s: readinessProbe names port %s the container does not declare"
                            % (cw, rp["httpGet"]["port"]))
                    probe = "http %s %d %s" % (pod["ip"], port, rp["httpGet"].get("path", "/"))
                elif "tcpSocket" in rp:
                    port = rp["tcpSocket"]["port"]
                    port = ports.get(port) if isinstance(port, str) else port
                    probe = "tcp %s %d" % (pod["ip"], port)
                else:
                    die("%s: readinessProbe kind %s is not emulated" % (cw, list(rp)))
        with open(os.path.join(sdir, "mountpoints"), "w") as fh:
            fh.write("".join(m + "\n" for m in sorted(mountpoints)))
        with open(os.path.join(sdir, "restart"), "w") as fh:
            fh.write(ps.get("restartPolicy", "Always") + "\n")
        with open(os.path.join(sdir, "probe"), "w") as fh:
            fh.write(probe + "\n")
        # the names the Services give this pod once it is ready
        names = []
        for s in services:
            sel = s["spec"].get("selector")
            if not sel or any(pod["meta"]["labels"].get(k) != v for k, v in sel.items()):
                continue
            sn = s["metadata"]["name"]
            names += [sn, "%s.%s" % (sn, NAMESPACE), "%s.%s.%s" % (sn, NAMESPACE, DOMAIN)]
            if s["spec"].get("clusterIP") == "None" and pod["subdomain"] == sn:
                h = "%s.%s" % (pod["hostname"], sn)
                names += [h, "%s.%s" % (h, NAMESPACE), "%s.%s.%s" % (h, NAMESPACE, DOMAIN)]
        with open(os.path.join(sdir, "dns"), "w") as fh:
            fh.write(("%s %s\n" % (pod["ip"], " ".join(names))) if names else "")
        lst.append("%s %s %s" % (pn, pod["ip"], pod["kind"]))
    with open(hosts, "w") as fh:
        fh.write("127.0.0.1 localhost\n")
    os.chmod(hosts, 0o644)
    with open(os.path.join(state, "pods.txt"), "w") as fh:
        fh.write("".join(x + "\n" for x in lst))


if __name__ == "__main__":
    main()
