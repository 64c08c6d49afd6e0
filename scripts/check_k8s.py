"""Checks k8s/ and the Dockerfile against the Kubernetes schemas and against droidmesh itself.

Renders the kustomize base and each overlay with `kubectl kustomize`, validates every object
strictly against the schemas of each Kubernetes version in VERSIONS (kubernetes-validate), then
runs the consistency rules of k8s_rules.py on the rendered objects and dockerfile_rules on the
Dockerfile, and the rule of k8s_secrets.py on where Secrets go (with a self-test that a task
Secret given to another service is caught). Prints one line per failure and a count; exits 1 when anything failed.
"""
import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import yaml

import k8s_rules
import k8s_secrets

# The oldest Kubernetes the manifests support (native sidecars, preStop sleep, gRPC probes) and
# the newest whose schemas kubernetes-validate ships.
VERSIONS = ["1.30.0", "1.37.0"]
TARGETS = ["k8s/base", "k8s/overlays/local", "k8s/overlays/production"]
# Overlays that run without the agents' autoscalers (no custom metrics API there).
NO_AUTOSCALING = {"k8s/overlays/local"}


class Report:
    """Counts checks; remembers every failure with where it was found."""

    def __init__(self):
        self.passed = 0
        self.failures = []

    def check(self, ok, where, message):
        if ok:
            self.passed += 1
        else:
            self.failures.append(f"{where}: {message}")
        return ok


def run(cmd, timeout=60):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def binary_commands(binary):
    """The subcommands of `droidmesh --help` and the services `droidmesh serve` accepts."""
    top = run([binary, "--help"])
    section = top.split("Commands:", 1)[-1].split("Options:", 1)[0]
    commands = {m.group(1) for m in re.finditer(r"^\s{2}([a-z][a-z0-9-]*)\s", section, re.M)}
    serve = run([binary, "serve", "--help"])
    found = re.search(r"\[possible values: ([^\]]+)\]", serve)
    if not found:
        raise RuntimeError("`droidmesh serve --help` lists no [possible values: ...] for <SERVICE>")
    return commands, [s.strip() for s in found.group(1).split(",")]


def listen_defaults(repo):
    """`impl Default for Listen` in droidmesh/src/config.rs, with the services' ports from the
    table in droidmesh/src/services.rs: the ports the binary uses when the config sets none."""
    src = (repo / "droidmesh/src/config.rs").read_text()
    block = re.search(r"impl Default for Listen \{(.*?)\n\}", src, re.S)
    if not block:
        raise RuntimeError("droidmesh/src/config.rs has no `impl Default for Listen`")
    defaults = {k: int(v.replace("_", "")) for k, v in re.findall(r"(\w+): (\d[\d_]*),", block.group(1))}
    defaults.update({key: port for _variant, _name, key, port in k8s_secrets.service_table(repo)})
    return defaults



def render(kubectl, repo, target):
    out = run([kubectl, "kustomize", str(repo / target)])
    return [d for d in yaml.safe_load_all(out) if d]


def validate_schemas(report, target, objects):
    for obj in objects:
        name = f"{target} {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
                report.check(True, name, "")
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                report.check(False, name, f"not valid for Kubernetes {version}: {path}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError as e:
                report.check(False, name, f"no schema to validate against: {e.message}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True, help="the droidmesh binary CI built")
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    repo = Path(args.repo)
    report = Report()

    commands, services = binary_commands(args.binary)
    holders = k8s_secrets.secret_holders(repo)
    facts = k8s_rules.Facts(
        commands=commands,
        services=services,
        listen_defaults=listen_defaults(repo),
        adapter_metrics=k8s_rules.adapter_metrics(repo / "k8s/prometheus-adapter/values.yaml"),
        image_uid=k8s_rules.dockerfile_rules(report, repo),
        version=tomllib.loads((repo / "Cargo.toml").read_text())["workspace"]["package"]["version"],
    )
    for target in TARGETS:
        objects = render(args.kubectl, repo, target)
        validate_schemas(report, target, objects)
        k8s_rules.check_rendering(
            report,
            target,
            objects,
            facts,
            autoscaled=target not in NO_AUTOSCALING,
            released=target.endswith("production"),
        )
        config_maps = k8s_rules.named(objects, "ConfigMap")
        task_secrets = k8s_secrets.check_secrets(report, target, objects, holders, k8s_rules.effective_config, config_maps)
        k8s_secrets.self_test(report, target, objects, holders, k8s_rules.effective_config, config_maps, task_secrets)

    for failure in report.failures:
        print(f"FAIL {failure}")
    print(
        f"k8s: {len(TARGETS)} renderings, Kubernetes {', '.join(VERSIONS)}; "
        f"{report.passed} checks passed, {len(report.failures)} failed"
    )
    return 1 if report.failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, subprocess.TimeoutExpired, yaml.YAMLError) as e:
        print(f"FAIL {e}")
        sys.exit(1)
