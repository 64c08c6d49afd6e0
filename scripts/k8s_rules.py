"""The consistency rules check_k8s.py applies: manifests against the binary, its config and code,
the autoscaler's metric against the Prometheus adapter's rules, the collector's config against
its Service, and the Dockerfile against CI's build."""
import re
import shlex
import tomllib
from dataclasses import dataclass
from urllib.parse import urlparse

import yaml

AGENTS = {"executor", "manager", "scripter", "text-manipulator"}
EDGE = {"gateway", "device"}
# Seconds the grace period keeps beyond preStop + drain, for the process to exit.
EXIT_MARGIN_SECS = 5
# The device pod's adb server sidecar: the one container allowed to run as root, when it is
# privileged for the host's USB bus (k8s/components/usb-phones).
ADB_SIDECAR = "adb-server"


@dataclass
class Facts:
    commands: set
    services: list
    listen_defaults: dict
    adapter_metrics: set
    image_uid: int
    version: str


def is_droidmesh(image):
    return re.split(r"[:@]", image.rsplit("/", 1)[-1])[0] == "droidmesh"


def pod_containers(pod):
    return pod.get("initContainers", []) + pod.get("containers", [])


def named(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == kind}


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def adapter_metrics(path):
    """Custom metric names the Prometheus adapter's rules serve, each from the in-flight gauge."""
    values = yaml.safe_load(path.read_text())
    names = set()
    for rule in values.get("rules", {}).get("custom", []):
        if "rpc_server_active_requests" in rule.get("seriesQuery", "") and "rpc_server_active_requests" in rule.get(
            "metricsQuery", ""
        ):
            names.add(rule.get("name", {}).get("as"))
    return names


def effective_config(c, pod, config_maps):
    """The droidmesh.toml a container is started with, and its environment."""
    env = {}
    for src in c.get("envFrom", []):
        ref = src.get("configMapRef", {}).get("name")
        env.update(config_maps.get(ref, {}).get("data", {}))
    env.update({e["name"]: e["value"] for e in c.get("env", []) if "value" in e})
    args = c.get("args", [])
    config = {}
    if "--config" in args:
        path = args[args.index("--config") + 1]
        directory, _, file = path.rpartition("/")
        for m in c.get("volumeMounts", []):
            if m["mountPath"].rstrip("/") != directory:
                continue
            vol = next((v for v in pod.get("volumes", []) if v["name"] == m["name"]), {})
            data = config_maps.get(vol.get("configMap", {}).get("name"), {}).get("data", {})
            if file in data:
                config = tomllib.loads(data[file])
    return config, env


def section(config, env, name, defaults=None):
    merged = dict(defaults or {})
    merged.update(config.get(name, {}))
    prefix = f"DROIDMESH_{name.upper()}__"
    merged.update({k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix)})
    return merged


def check_rendering(report, target, objects, facts, autoscaled, released):
    deployments = named(objects, "Deployment")
    services = named(objects, "Service")
    config_maps = named(objects, "ConfigMap")
    pdbs = named(objects, "PodDisruptionBudget")
    hpas = named(objects, "HorizontalPodAutoscaler")

    served = {}
    for dname, d in deployments.items():
        where = f"{target} Deployment/{dname}"
        pod = d["spec"]["template"]["spec"]
        labels = d["spec"]["template"]["metadata"].get("labels", {})
        for c in pod_containers(pod):
            check_container_basics(report, where, c, pod, facts, released)
            if not is_droidmesh(c["image"]) or "command" in c:
                continue
            args = c.get("args", [])
            cmd = args[0] if args else ""
            if not report.check(cmd in facts.commands, where, f"container {c['name']} runs `droidmesh {cmd}`, which the binary lacks (it has: {', '.join(sorted(facts.commands))})"):
                continue
            if cmd == "serve":
                svc = args[1] if len(args) > 1 else ""
                if report.check(svc in facts.services, where, f"`serve {svc}` is not a service the binary serves ({', '.join(facts.services)})"):
                    report.check(svc not in served, where, f"`serve {svc}` is also run by {served.get(svc, ('',))[0]}")
                    served[svc] = (dname, d, c)
        # Every part of the mesh (not test fixtures such as the local overlay's simulator).
        if labels.get("app.kubernetes.io/name") == "droidmesh":
            report.check(
                any(selects(p["spec"]["selector"].get("matchLabels"), labels) for p in pdbs.values()),
                where,
                "no PodDisruptionBudget selects its pods",
            )
    for svc in facts.services:
        report.check(svc in served, target, f"no Deployment runs `droidmesh serve {svc}`")

    collectors = set()
    for svc, (dname, d, c) in served.items():
        collectors.add(check_service(report, f"{target} Deployment/{dname}", svc, d, c, facts, services, config_maps))
    for url in filter(None, collectors):
        check_collector(report, target, url, deployments, services, config_maps)

    for pname, p in pdbs.items():
        check_pdb(report, f"{target} PodDisruptionBudget/{pname}", p, deployments)
    check_autoscaling(report, target, served, hpas, deployments, facts, autoscaled)


def check_container_basics(report, where, c, pod, facts, released):
    res = c.get("resources", {})
    report.check(
        {"cpu", "memory"} <= set(res.get("requests", {})) and "memory" in res.get("limits", {}),
        where,
        f"container {c['name']} needs cpu and memory requests and a memory limit, has {res}",
    )
    sc = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
    if c["name"] == ADB_SIDECAR and sc.get("privileged"):
        return  # root for the host's USB device nodes (k8s/components/usb-phones)
    report.check(
        sc.get("runAsNonRoot") is True and sc.get("runAsUser", 1) != 0,
        where,
        f"container {c['name']} may run as root (runAsNonRoot {sc.get('runAsNonRoot')}, runAsUser {sc.get('runAsUser')})",
    )
    report.check(
        c.get("securityContext", {}).get("allowPrivilegeEscalation") is False,
        where,
        f"container {c['name']} must set allowPrivilegeEscalation: false",
    )
    if is_droidmesh(c["image"]):
        report.check(
            sc.get("runAsUser") == facts.image_uid,
            where,
            f"container {c['name']} runs as uid {sc.get('runAsUser')}, the image's user is {facts.image_uid}",
        )
        if released:
            tag = c["image"].rsplit(":", 1)[-1] if ":" in c["image"].rsplit("/", 1)[-1] else "latest"
            report.check(tag == facts.version, where, f"image {c['image']}: expected the workspace version {facts.version}")


def check_service(report, where, svc, d, c, facts, services, config_maps):
    pod = d["spec"]["template"]["spec"]
    meta = d["spec"]["template"]["metadata"]
    key = svc.replace("-", "_")
    config, env = effective_config(c, pod, config_maps)
    if not report.check(bool(config), where, "its --config file is not found in a mounted ConfigMap"):
        return None
    listen = section(config, env, "listen", facts.listen_defaults)
    endpoints = section(config, env, "endpoints")
    report.check(
        str(listen.get("host", "127.0.0.1")) in ("0.0.0.0", "::"),
        where,
        f"listens on {listen.get('host', '127.0.0.1')}: set DROIDMESH_LISTEN__HOST=0.0.0.0 or probes and peers cannot reach it",
    )
    port = int(listen.get(key, -1))
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    report.check(ports.get("grpc") == port, where, f"container port `grpc` is {ports.get('grpc')}, the config's [listen] {key} is {port}")
    for probe in ("readinessProbe", "livenessProbe"):
        got = c.get(probe, {}).get("grpc", {}).get("port")
        report.check(got == port, where, f"{probe} must be a gRPC probe on {port}, is {c.get(probe)}")

    admin = listen.get("admin")
    if report.check(admin is not None, where, "the config sets no [listen] admin port (metrics)"):
        ann = meta.get("annotations", {})
        report.check(ports.get("metrics") == int(admin), where, f"container port `metrics` is {ports.get('metrics')}, [listen] admin is {admin}")
        want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(admin), "prometheus.io/path": "/metrics"}
        for k, v in want.items():
            report.check(ann.get(k) == v, where, f"pod annotation {k} is {ann.get(k)!r}, expected {v!r}")

    key = "drain_secs" if svc in EDGE else "agent_drain_secs"
    drain = listen.get(key)
    notice_ms = listen.get("drain_notice_ms")
    if report.check(drain is not None and notice_ms is not None, where, f"neither the config nor the binary's defaults set [listen] {key} and drain_notice_ms"):
        pre = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        grace = pod.get("terminationGracePeriodSeconds", 30)
        notice = -(-int(notice_ms) // 1000)
        need = pre + notice + int(drain) + EXIT_MARGIN_SECS
        report.check(grace >= need, where, f"terminationGracePeriodSeconds {grace} is under preStop {pre} s + notice {notice} s + drain {drain} s + {EXIT_MARGIN_SECS} s = {need}")

    labels = meta.get("labels", {})
    mine = [s for s in services.values() if selects(s["spec"].get("selector"), labels)]
    report.check(
        any(s["spec"].get("clusterIP") == "None" and any(p["port"] == port and p.get("targetPort") in ("grpc", port) for p in s["spec"]["ports"]) for s in mine),
        where,
        f"no headless Service selects it on port {port}",
    )
    http = int(listen.get("gateway_http", 0) or 0) if svc == "gateway" else 0
    if http:
        report.check(ports.get("http") == http, where, f"container port `http` is {ports.get('http')}, [listen] gateway_http (the HTTP/JSON face) is {http}")
        report.check(
            any(any(p["port"] == http and p.get("targetPort") in ("http", http) for p in s["spec"]["ports"]) for s in mine),
            where,
            f"no Service selects it on port {http} (the HTTP/JSON face, [listen] gateway_http)",
        )
    for url in filter(None, (u.strip() for u in str(endpoints.get(key, "")).split(","))):
        u = urlparse(url)
        host = (u.hostname or "").split(".")[0]
        target = services.get(host)
        report.check(
            target is not None and target in mine and u.port == port and target["spec"].get("clusterIP") == "None",
            where,
            f"[endpoints] {key} = {url}: expected a headless Service of this Deployment on port {port}",
        )

    if svc == "device":
        check_adb_sidecar(report, where, pod, section(config, env, "device"))
    if svc == "gateway":
        check_gateway_store(report, where, d, c, pod, section(config, env, "gateway"))

    otlp = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    report.check(bool(otlp), where, "OTEL_EXPORTER_OTLP_ENDPOINT is not set")
    return otlp


def check_gateway_store(report, where, d, c, pod, gateway):
    """One process owns an embedded task store (SQLite, or memory): one replica, replaced by
    Recreate, its data directory on a persistent volume. Several replicas, or a rolling update,
    need the shared PostgreSQL store, whose URL (it holds a password) comes from a Secret."""
    from_secret = any(e["name"] == "DROIDMESH_GATEWAY__STORE" and "secretKeyRef" in e.get("valueFrom", {}) for e in c.get("env", []))
    store = str(gateway.get("store", "sqlite")).strip()
    if from_secret or store.startswith(("postgres://", "postgresql://")):
        report.check(from_secret, where, "gateway.store is a PostgreSQL URL in plain config: take DROIDMESH_GATEWAY__STORE from a Secret (the URL holds a password)")
        return
    replicas = d["spec"].get("replicas", 1)
    strategy = d["spec"].get("strategy", {}).get("type", "RollingUpdate")
    report.check(
        replicas == 1 and strategy == "Recreate",
        where,
        f"gateway.store = {store!r} belongs to one process: expected 1 replica replaced by Recreate, found {replicas} with {strategy} (several replicas need a postgres:// store)",
    )
    if store == "memory":
        return
    directory = str(gateway.get("data_dir", "")).rstrip("/") if store == "sqlite" else store[len("sqlite:"):].rpartition("/")[0]
    mount = next((m for m in c.get("volumeMounts", []) if directory and m["mountPath"].rstrip("/") == directory), None)
    vol = next((v for v in pod.get("volumes", []) if mount and v["name"] == mount["name"]), {})
    report.check(
        "persistentVolumeClaim" in vol,
        where,
        f"the SQLite task store's directory {directory or '(gateway.data_dir unset)'} is not on a persistentVolumeClaim: tasks would not survive a restart",
    )


def check_adb_sidecar(report, where, pod, device):
    """The device service's [device] adb_server is the sidecar's adb server on the pod's loopback."""
    server = str(device.get("adb_server", "127.0.0.1:5037"))
    if not server:
        return  # adb server transport off: TCP phones only
    host, _, port = server.rpartition(":")
    sidecar = next((c for c in pod.get("initContainers", []) if c["name"] == ADB_SIDECAR), None)
    if not report.check(sidecar is not None and sidecar.get("restartPolicy") == "Always", where, f"[device] adb_server = {server}, but the pod has no {ADB_SIDECAR} sidecar (restartPolicy: Always)"):
        return
    script = " ".join(sidecar.get("args", []))
    probe = sidecar.get("startupProbe", {}).get("tcpSocket", {}).get("port")
    report.check(
        host in ("127.0.0.1", "localhost") and f"-L tcp:localhost:{port} nodaemon server" in script and str(probe) == port,
        where,
        f"[device] adb_server = {server}: the {ADB_SIDECAR} sidecar must serve `-L tcp:localhost:{port}` with its startupProbe on {port}",
    )


def check_collector(report, target, url, deployments, services, config_maps):
    """The collector the services send spans to: its Service port reaches the OTLP/gRPC receiver,
    and its config's pipelines name only components it defines, with the env they read set."""
    where = f"{target} OTEL_EXPORTER_OTLP_ENDPOINT={url}"
    u = urlparse(url)
    svc = services.get((u.hostname or "").split(".")[0])
    if not report.check(svc is not None, where, "no Service of that name"):
        return
    port = next((p for p in svc["spec"]["ports"] if p["port"] == u.port), None)
    pods = [d for d in deployments.values() if selects(svc["spec"].get("selector"), d["spec"]["template"]["metadata"].get("labels", {}))]
    if not report.check(port is not None and len(pods) == 1, where, f"expected a Service port {u.port} in front of one Deployment"):
        return
    pod = pods[0]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    by_name = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    container_port = by_name.get(port["targetPort"], port["targetPort"])
    config_arg = next((a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--config=")), "")
    directory, _, file = config_arg.rpartition("/")
    mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == directory), None)
    vol = next((v for v in pod.get("volumes", []) if mount and v["name"] == mount["name"]), {})
    data = config_maps.get(vol.get("configMap", {}).get("name"), {}).get("data", {}).get(file)
    if not report.check(data is not None, where, f"the collector's --config={config_arg} is not in a mounted ConfigMap"):
        return
    cfg = yaml.safe_load(data)
    grpc = cfg.get("receivers", {}).get("otlp", {}).get("protocols", {}).get("grpc", {}).get("endpoint", "")
    report.check(grpc.endswith(f":{container_port}"), where, f"the collector's otlp grpc receiver listens on {grpc!r}; the Service sends to container port {container_port}")
    for pname, pipe in cfg.get("service", {}).get("pipelines", {}).items():
        for part in ("receivers", "processors", "exporters"):
            for comp in pipe.get(part, []):
                report.check(comp in (cfg.get(part) or {}), where, f"collector pipeline {pname} names {part[:-1]} {comp}, which its config does not define")
    env = {e["name"] for e in c.get("env", [])}
    for src in c.get("envFrom", []):
        env |= set(config_maps.get(src.get("configMapRef", {}).get("name"), {}).get("data", {}))
    for var in re.findall(r"\$\{env:(\w+)\}", data):
        report.check(var in env, where, f"the collector's config reads ${{env:{var}}}, which its container does not set")


def check_pdb(report, where, p, deployments):
    spec = p["spec"]
    matched = [d for d in deployments.values() if selects(spec["selector"].get("matchLabels"), d["spec"]["template"]["metadata"].get("labels", {}))]
    report.check(bool(matched), where, "selects no Deployment's pods")
    mu, ma = spec.get("maxUnavailable"), spec.get("minAvailable")
    ok = (isinstance(mu, int) and mu >= 1) or (isinstance(ma, int) and all(ma < d["spec"].get("replicas", 1) for d in matched))
    report.check(ok, where, f"lets no pod be evicted (maxUnavailable {mu!r}, minAvailable {ma!r}): node drains would hang")


def check_autoscaling(report, target, served, hpas, deployments, facts, autoscaled):
    by_target = {}
    for hname, h in hpas.items():
        where = f"{target} HorizontalPodAutoscaler/{hname}"
        ref = h["spec"]["scaleTargetRef"]["name"]
        report.check(ref in deployments, where, f"scales {ref}, which is not a Deployment here")
        by_target.setdefault(ref, []).append(hname)
        spec = h["spec"]
        report.check(spec.get("minReplicas", 1) <= spec["maxReplicas"], where, "minReplicas exceeds maxReplicas")
        for m in spec.get("metrics", []):
            name = m.get("pods", {}).get("metric", {}).get("name")
            report.check(
                m.get("type") == "Pods" and name in facts.adapter_metrics and m["pods"]["target"].get("type") == "AverageValue",
                where,
                f"scales on {m.get('type')} {name or m.get('resource', {}).get('name')}: expected the in-flight Pods metric of the Prometheus adapter ({', '.join(sorted(facts.adapter_metrics))}) per replica",
            )
    for svc, (dname, _, _) in served.items():
        count = len(by_target.get(dname, []))
        if svc in AGENTS and autoscaled:
            report.check(count == 1, f"{target} Deployment/{dname}", f"expected one HorizontalPodAutoscaler on in-flight work, found {count}")
        elif svc in EDGE:
            report.check(count == 0, f"{target} Deployment/{dname}", "must not be autoscaled (one replica holds its state)")


def dockerfile_rules(report, repo):
    """Checks the Dockerfile builds what CI builds and runs as a numeric non-root user; returns
    that user's uid."""
    where = "Dockerfile"
    text = (repo / "Dockerfile").read_text()
    lines = re.sub(r"\\\n", " ", text).splitlines()
    stages, current = [], None
    for line in lines:
        word = line.strip().split(maxsplit=1)
        if not word or word[0].startswith("#"):
            continue
        if word[0].upper() == "FROM":
            current = {"from": word[1], "lines": []}
            stages.append(current)
        elif current is not None:
            current["lines"].append((word[0].upper(), word[1] if len(word) > 1 else ""))
    if not report.check(len(stages) >= 2, where, "expected a build stage and a runtime stage"):
        return -1
    build, final = stages[0], stages[-1]

    test_sh = (repo / "scripts/test.sh").read_text()
    ci = [shlex.split(l.strip()) for l in test_sh.splitlines() if l.strip().startswith("cargo build")]
    runs = " && ".join(arg for op, arg in build["lines"] if op == "RUN")
    docker = [shlex.split(part.strip()) for part in runs.split("&&") if part.strip().startswith("cargo build")]
    report.check(len(ci) == 1, where, f"scripts/test.sh should have one `cargo build` line, has {len(ci)}")
    report.check(len(docker) == 1, where, f"the build stage should run one `cargo build`, runs {len(docker)}")
    if len(ci) == 1 and len(docker) == 1:
        report.check(
            "--release" in docker[0] and sorted(a for a in docker[0] if a != "--release") == sorted(ci[0]),
            where,
            f"builds `{' '.join(docker[0])}`; CI builds `{' '.join(ci[0])}` (the image should build the same, with --release)",
        )
    # The shipped binary carries no debug info or symbols: the release profile strips it (or the
    # build stage does).
    release = tomllib.loads((repo / "Cargo.toml").read_text()).get("profile", {}).get("release", {})
    report.check(
        release.get("strip") in (True, "symbols") or re.search(r"\bstrip\b[^&]*target/release/droidmesh", runs) is not None,
        where,
        f"the image's droidmesh is not stripped: [profile.release] in Cargo.toml has strip = {release.get('strip', 'unset')!r}, expected true (or a `strip target/release/droidmesh` in the build stage)",
    )

    m = re.match(r"rust:(\d+)\.(\d+)[\w.]*-slim-(\w+)", build["from"])
    wanted = tomllib.loads((repo / "Cargo.toml").read_text())["workspace"]["package"]["rust-version"]
    if report.check(m is not None, where, f"build stage FROM {build['from']}: expected rust:<version>-slim-<debian>"):
        have = (int(m.group(1)), int(m.group(2)))
        need = tuple(int(x) for x in wanted.split(".")[:2])
        report.check(have >= need, where, f"toolchain {have[0]}.{have[1]} is older than the workspace's rust-version {wanted}")
        runtime = re.match(r"debian:(\w+)-slim", final["from"].split()[0])
        report.check(runtime is not None and runtime.group(1) == m.group(3), where, f"runtime FROM {final['from']} should be the build stage's Debian ({m.group(3)})-slim, for its glibc")

    users = [arg for op, arg in final["lines"] if op == "USER"]
    uid = -1
    if report.check(len(users) == 1 and re.fullmatch(r"\d+(:\d+)?", users[0].strip()) is not None, where, f"the runtime stage needs one numeric USER uid[:gid], has {users}"):
        uid = int(users[0].split(":")[0])
        report.check(uid != 0, where, "USER is root")
    entry = [arg for op, arg in final["lines"] if op == "ENTRYPOINT"]
    report.check(entry == ['["droidmesh"]'], where, f"ENTRYPOINT should be [\"droidmesh\"], is {entry}")
    report.check(
        any(op == "COPY" and "--from=" in arg and arg.split()[-1] == "/usr/local/bin/droidmesh" for op, arg in final["lines"]),
        where,
        "the runtime stage does not copy the built binary to /usr/local/bin/droidmesh",
    )
    ignore = (repo / ".dockerignore").read_text().split() if (repo / ".dockerignore").exists() else []
    report.check("target/" in ignore or "target" in ignore, where, ".dockerignore must leave out target/")
    return uid
