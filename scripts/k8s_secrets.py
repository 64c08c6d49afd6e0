"""Where Kubernetes Secrets may go: the rule check_k8s.py applies to every rendering.

A task's secrets (the values `type_secret` types) belong only in the services whose code reads
them: the `serve` targets whose arm in droidmesh/src/mesh.rs loads `Secrets` (today the
executor). There they come from a Secret volume mounted at the effective `secrets.dir`, or from
`DROIDMESH_SECRET_<ID>` variables taken from a Secret. Every Secret a droidmesh service gets
must be one it reads where it is put: the gateway's keys file and PostgreSQL URL, the [tls]
files, and a holder's task secrets. Any other container that gets a Secret the holders use for
task secrets, a DROIDMESH_SECRET_* variable, or a Secret at its own secrets.dir, fails.
"""
import copy
import re

SECRET_ENV = "DROIDMESH_SECRET_"


def secret_holders(repo):
    """The services whose `serve` arm in droidmesh/src/mesh.rs loads the executor's Secrets."""
    src = (repo / "droidmesh/src/mesh.rs").read_text()
    names = {variant: name for variant, name, _key, _port in service_table(repo)}
    body = src.split("fn bare_routes", 1)[-1]
    arms = re.split(r"\n\s+Service::(\w+) => \{", body)
    holders = {names.get(arms[i], arms[i]) for i in range(1, len(arms) - 1, 2) if "Secrets::load" in arms[i + 1]}
    if not holders:
        raise RuntimeError("droidmesh/src/mesh.rs: no `serve` arm loads Secrets (Secrets::load)")
    return holders


def service_table(repo):
    """The rows of `SERVICES` in droidmesh/src/services.rs: (variant, name, config key, default port)."""
    src = (repo / "droidmesh/src/services.rs").read_text()
    rows = re.findall(r'spec!\(\s*(\w+),\s*"([a-z-]+)",\s*(\w+),\s*(\d[\d_]*),', src)
    if len(rows) != 6:
        raise RuntimeError(f"droidmesh/src/services.rs: expected the 6 spec!(...) rows of SERVICES, found {len(rows)}")
    return [(v, n, k, int(p.replace("_", ""))) for v, n, k, p in rows]


def _dir_of(path):
    path = str(path or "").rstrip("/")
    return path.rpartition("/")[0] if "/" in path else ""


def _setting(config, env, section, *keys):
    """A setting from the container's environment (DROIDMESH_SECTION__A__B) or its config file."""
    var = "DROIDMESH_" + "__".join([section] + list(keys)).upper()
    if var in env:
        return env[var]
    value = config.get(section, {})
    for k in keys:
        value = value.get(k, {}) if isinstance(value, dict) else {}
    return value if isinstance(value, str) else None


def secret_refs(c, pod):
    """Each Secret the container gets: (secret name, how: a mount path, `env NAME` or `envFrom`)."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    refs = []
    for m in c.get("volumeMounts", []):
        v = volumes.get(m["name"], {})
        names = [v["secret"].get("secretName")] if "secret" in v else []
        names += [s["secret"].get("name") for s in v.get("projected", {}).get("sources", []) if "secret" in s]
        refs += [(n, m["mountPath"].rstrip("/")) for n in names]
    refs += [(s["secretRef"].get("name"), "envFrom") for s in c.get("envFrom", []) if "secretRef" in s]
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            refs.append((ref.get("name"), f"env {e['name']}"))
    return refs


def _served(objects):
    """(deployment name, pod, container, service) for each container running `droidmesh serve`."""
    for d in objects:
        if d.get("kind") != "Deployment":
            continue
        pod = d["spec"]["template"]["spec"]
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            args = c.get("args", [])
            image = c.get("image", "").rsplit("/", 1)[-1]
            if "command" not in c and re.split(r"[:@]", image)[0] == "droidmesh" and args[:1] == ["serve"] and len(args) > 1:
                yield d["metadata"]["name"], pod, c, args[1]


def check_secrets(report, target, objects, holders, effective_config, config_maps):
    """Applies the rule to one rendering (see the module's docstring)."""
    task_secrets = set()
    seen = set()
    for dname, pod, c, svc in _served(objects):
        config, env = effective_config(c, pod, config_maps)
        where = f"{target} Deployment/{dname}"
        secrets_dir = (_setting(config, env, "secrets", "dir") or "").rstrip("/")
        allowed = {_dir_of(_setting(config, env, "tls", k)) for k in ("cert", "key", "ca")} - {""}
        if svc == "gateway":
            allowed |= {_dir_of(_setting(config, env, "gateway", "auth", "keys_file")), _dir_of(_setting(config, env, "gateway", "store_ca"))} - {""}
            allowed.add("env DROIDMESH_GATEWAY__STORE")
        for e in c.get("env", []):
            if e["name"].startswith(SECRET_ENV) and "value" in e:
                report.check(False, where, f"container {c['name']} sets {e['name']} as a plain value in the manifest: take it from a Secret (secretKeyRef)")
        refs = secret_refs(c, pod)
        if svc in holders:
            for name, how in refs:
                task = how == "envFrom" or how.startswith(f"env {SECRET_ENV}") or (secrets_dir and how == secrets_dir)
                if task:
                    task_secrets.add(name)
                report.check(task or how in allowed, where, f"container {c['name']} gets Secret {name} at {how}, which `serve {svc}` does not read there (secrets.dir is {secrets_dir or 'unset'})")
            if secrets_dir:
                report.check(
                    any(how == secrets_dir for _, how in refs),
                    where,
                    f"secrets.dir is {secrets_dir}, but no Secret volume is mounted there in container {c['name']}",
                )
        else:
            for name, how in refs:
                task = how == "envFrom" or how.startswith(f"env {SECRET_ENV}") or (secrets_dir and how == secrets_dir)
                report.check(
                    how in allowed and not task,
                    where,
                    f"container {c['name']} gets Secret {name} at {how}: `serve {svc}` does not read task secrets "
                    f"(only {', '.join(sorted(holders))} may hold them) nor any Secret there",
                )
        seen.add((dname, c["name"]))
    # Any other container (the simulator, the collector, a sidecar) must not get a task Secret.
    for d in objects:
        if d.get("kind") != "Deployment":
            continue
        pod = d["spec"]["template"]["spec"]
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            if (d["metadata"]["name"], c["name"]) in seen:
                continue
            for name, how in secret_refs(c, pod):
                report.check(
                    name not in task_secrets,
                    f"{target} Deployment/{d['metadata']['name']}",
                    f"container {c['name']} gets the task Secret {name} at {how}; only {', '.join(sorted(holders))} may hold task secrets",
                )
    return task_secrets


def self_test(report, target, objects, holders, effective_config, config_maps, task_secrets):
    """The rule must catch a task Secret given to a service that does not hold secrets: the
    rendering is copied, the Secret mounted into another service's pod (at that service's
    secrets.dir), and the copy must fail; likewise a DROIDMESH_SECRET_* variable there."""
    name = sorted(task_secrets)[0] if task_secrets else "droidmesh-task-secrets"
    for how in ("volume", "env"):
        objs = copy.deepcopy(objects)
        victim = next(((dname, pod, c) for dname, pod, c, svc in _served(objs) if svc not in holders), None)
        if victim is None:
            report.check(False, target, "the secret rule's self-test found no service that holds no secrets")
            return
        _, pod, c = victim
        if how == "volume":
            pod.setdefault("volumes", []).append({"name": "stolen", "secret": {"secretName": name}})
            c.setdefault("volumeMounts", []).append({"name": "stolen", "mountPath": "/var/run/stolen"})
            c.setdefault("env", []).append({"name": "DROIDMESH_SECRETS__DIR", "value": "/var/run/stolen"})
        else:
            c.setdefault("env", []).append({"name": f"{SECRET_ENV}PIN", "valueFrom": {"secretKeyRef": {"name": name, "key": "pin"}}})
        probe = type(report)()
        check_secrets(probe, target, objs, holders, effective_config, config_maps)
        report.check(
            bool(probe.failures),
            target,
            f"the secret rule let Secret {name} ({how}) into Deployment/{victim[0]}, which holds no task secrets",
        )
