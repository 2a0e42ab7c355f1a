"""deploy/kubernetes: the Helm chart passes ``helm lint``, the committed manifests are what
it renders, Kubernetes' own schemas accept them (``kubernetes-validate --strict``, offline),
the PrometheusRule is deploy/prometheus/alerts.yml and passes ``promtool check rules``, and
what the issue asks of the workers holds in the rendered objects: one group, a stable
name each, settings from a ConfigMap, secrets through the file config provider, probes on
/health with Strimzi's timings, a grace period covering the graceful shutdown, a
PodDisruptionBudget, a non-root read-only container, monitoring resources."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import kubernetes_validate
import pytest
import yaml

import eos
from eos.config.files import parse_properties
from tests.prometheus_server import ALERT_RULES, promtool
from tests.scripts import load_script

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
KUBERNETES = REPO / "deploy" / "kubernetes"
CONTAINERFILE = REPO / "deploy" / "image" / "Containerfile"
#: The oldest and the newest Kubernetes whose schemas kubernetes-validate bundles.
VERSIONS = ("1.25.0", "1.37.0")
CRDS = {"PodMonitor", "PrometheusRule", "ServiceMonitor"}

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def build() -> ModuleType:
    """The manifests builder, with helm built (once: ~4 minutes cold, cached in .cache/)."""
    module = load_script("deploy/kubernetes/build_manifests.py")
    module.ensure_helm()
    return module


@pytest.fixture(scope="module")
def rendered(build: ModuleType) -> str:
    return cast(str, build.render())


@pytest.fixture(scope="module")
def docs(rendered: str) -> dict[tuple[str, str], Doc]:
    found = [d for d in yaml.safe_load_all(rendered) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in found}


def one(docs: dict[tuple[str, str], Doc], kind: str) -> Doc:
    (found,) = [d for (k, _), d in docs.items() if k == kind]
    return found


def test_helm_lint_strict(build: ModuleType) -> None:
    out = build.helm("lint", "--strict", build.CHART)
    assert "0 chart(s) failed" in out


def test_committed_manifests_and_chart_copies_are_current(build: ModuleType) -> None:
    assert build.stale() == [], "run make kubernetes"


@pytest.mark.parametrize("version", VERSIONS)
def test_kubernetes_schemas_accept_every_object_strictly(
    docs: dict[tuple[str, str], Doc], version: str
) -> None:
    kinds = set()
    for (kind, _), doc in docs.items():
        if kind in CRDS:
            continue  # no schema bundled: checked below, field by field
        kubernetes_validate.validate(doc, version, strict=True)
        kinds.add(kind)
    assert kinds == {"ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"}


def test_kubernetes_validate_command_accepts_the_committed_manifests(build: ModuleType) -> None:
    """As a person would run it: only the two Prometheus Operator kinds lack a schema."""
    command = Path(sys.executable).parent / "kubernetes-validate"
    done = subprocess.run(
        [str(command), "-k", "1.33.0", "--strict", str(build.MANIFESTS)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    problems = [line for line in output.splitlines() if not line.startswith("INFO")]
    assert len(problems) == 2, output
    assert all("schema for kind PodMonitor" in line or "schema for kind PrometheusRule" in line
               for line in problems), output  # fmt: skip


def test_strict_validation_would_catch_a_mistake(docs: dict[tuple[str, str], Doc]) -> None:
    broken = copy.deepcopy(one(docs, "StatefulSet"))
    broken["spec"]["replicas"] = "3"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)
    broken = copy.deepcopy(one(docs, "StatefulSet"))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def test_chart_version_is_eos_version(build: ModuleType) -> None:
    chart = yaml.safe_load((build.CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == eos.__version__


def pod(docs: dict[tuple[str, str], Doc]) -> Doc:
    spec: Doc = one(docs, "StatefulSet")["spec"]["template"]
    return spec


def worker_properties(docs: dict[tuple[str, str], Doc]) -> dict[str, str]:
    config = docs[("ConfigMap", "eos-config")]
    return parse_properties(config["data"]["worker.properties"])


def test_workers_are_one_group_with_a_stable_name_each(docs: dict[tuple[str, str], Doc]) -> None:
    statefulset = one(docs, "StatefulSet")
    headless = docs[("Service", "eos-headless")]
    assert statefulset["spec"]["serviceName"] == "eos-headless"
    assert headless["spec"]["clusterIP"] == "None"
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["updateStrategy"]["type"] == "RollingUpdate"  # one at a time
    (container,) = pod(docs)["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["EOS_REST_ADVERTISED_HOST_NAME"]["value"] == (
        "$(POD_NAME).eos-headless.$(POD_NAMESPACE).svc"
    )
    props = worker_properties(docs)
    assert props["group.id"] == "eos"
    assert {props[f"{t}.storage.topic"] for t in ("config", "offset", "status")} == {
        "eos-configs", "eos-offsets", "eos-status"
    }  # fmt: skip
    port = int(props["listeners"].rsplit(":", 1)[1])
    assert container["ports"] == [{"name": "rest", "containerPort": port}]
    rest = docs[("Service", "eos")]
    assert rest["spec"]["ports"][0]["targetPort"] == "rest"
    labels = pod(docs)["metadata"]["labels"]
    for service in (rest, headless):
        assert service["spec"]["selector"].items() <= labels.items()


def test_settings_from_a_configmap_and_secrets_through_the_file_provider(
    build: ModuleType, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    jaas = "${file:/etc/eos/secrets/kafka.properties:sasl.jaas.config}"
    values.write_text(yaml.safe_dump({"workerConfig": {
        "sasl.jaas.config": jaas, "offset.flush.interval.ms": 3600000, "producer.linger.ms": 5,
        "some.ratio": 0.25, "topic.tracking.enable": False,
    }}))  # fmt: skip
    docs = {
        (d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(build.render(values)) if d
    }
    props = worker_properties(docs)
    assert props["sasl.jaas.config"] == jaas
    assert props["offset.flush.interval.ms"] == "3600000"  # numbers stay numbers, not 3.6e+06
    assert (props["producer.linger.ms"], props["some.ratio"]) == ("5", "0.25")
    assert props["topic.tracking.enable"] == "false"
    assert props["config.providers"] == "file"
    assert props["config.providers.file.class"] == (
        "org.apache.kafka.common.config.provider.FileConfigProvider"
    )
    spec = pod(docs)["spec"]
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    secrets = mounts["/etc/eos/secrets"]
    assert secrets["readOnly"] is True
    assert volumes[secrets["name"]]["secret"]["secretName"] == "eos-secrets"
    config = mounts["/etc/eos/worker.properties"]
    assert volumes[config["name"]]["configMap"]["name"] == "eos-config"
    assert spec["containers"][0]["args"] == ["worker", "/etc/eos/worker.properties"]
    assert spec["enableServiceLinks"] is False  # no EOS_PORT_8083_TCP… in the pods


def test_probes_on_health_with_strimzis_timings(docs: dict[tuple[str, str], Doc]) -> None:
    (container,) = pod(docs)["spec"]["containers"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe] == {
            "httpGet": {"path": "/health", "port": "rest", "scheme": "HTTP"},
            "initialDelaySeconds": 60,
            "timeoutSeconds": 5,
            "periodSeconds": 10,
            "failureThreshold": 3,
        }, probe


def test_grace_period_covers_the_graceful_task_shutdown(docs: dict[tuple[str, str], Doc]) -> None:
    graceful_ms = int(worker_properties(docs)["task.shutdown.graceful.timeout.ms"])
    assert pod(docs)["spec"]["terminationGracePeriodSeconds"] >= graceful_ms / 1000 + 20


def test_disruption_budget_takes_one_worker_at_a_time(docs: dict[tuple[str, str], Doc]) -> None:
    budget = one(docs, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert (
        budget["spec"]["selector"]["matchLabels"].items() <= pod(docs)["metadata"]["labels"].items()
    )


def test_non_root_read_only_with_scratch_where_eos_and_spark_write(
    docs: dict[tuple[str, str], Doc],
) -> None:
    spec = pod(docs)["spec"]
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    image_user = next(
        line.split()[1]
        for line in CONTAINERFILE.read_text().splitlines()
        if line.startswith("USER")
    )
    assert f"{spec['securityContext']['runAsUser']}:{spec['securityContext']['runAsGroup']}" == (
        image_user
    )
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    scratch = {
        m["mountPath"] for m in container["volumeMounts"] if "emptyDir" in volumes[m["name"]]
    }
    assert scratch == {"/tmp", "/var/lib/eos"}  # Spark's local dir; EOS_CACHE_DIR and HOME
    assert "EOS_CACHE_DIR=/var/lib/eos" in CONTAINERFILE.read_text()


def test_resources_follow_the_sizing_docs(docs: dict[tuple[str, str], Doc]) -> None:
    (container,) = pod(docs)["spec"]["containers"]
    resources = container["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == "2Gi"
    assert "cpu" not in resources["limits"]  # no CPU throttling of commits
    assert "100 MiB + 1 MiB per task" in (REPO / "docs" / "sizing.md").read_text()


def test_pod_monitor_scrapes_every_worker(docs: dict[tuple[str, str], Doc]) -> None:
    monitor = one(docs, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items()
        <= pod(docs)["metadata"]["labels"].items()
    )
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "rest", "path": "/metrics", "interval": "15s", "scheme": "http"}
    ]
    # job="eos", from the pods' own label: what EosWorkerGone's up{job="eos"} reads
    assert pod(docs)["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "eos"


def test_prometheus_rule_is_alerts_yml_and_passes_promtool(
    docs: dict[tuple[str, str], Doc], tmp_path: Path
) -> None:
    rule = one(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule["spec"]) == {"groups"}
    assert rule["spec"] == yaml.safe_load(ALERT_RULES.read_text())
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(rule["spec"]))
    checked = promtool("check", "rules", rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 12 rules found" in checked.stdout


def test_connect_compatible_rules_on_request(build: ModuleType, tmp_path: Path) -> None:
    """monitoring.connectCompatRules: a second PrometheusRule, connect-compat.yml itself."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"monitoring": {"connectCompatRules": True}}))
    rendered = [d for d in yaml.safe_load_all(build.render(values)) if d]
    rules = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "PrometheusRule"}
    assert set(rules) == {"eos", "eos-connect-compat"}
    compat = REPO / "deploy" / "prometheus" / "connect-compat.yml"
    assert rules["eos-connect-compat"]["spec"] == yaml.safe_load(compat.read_text())
    for doc in rendered:
        if doc["kind"] not in CRDS:
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_tls_rest_network_policy_and_service_monitor(build: ModuleType, tmp_path: Path) -> None:
    """rest.tls: an https listener on the mounted Secret, probes and scrapes over HTTPS;
    networkPolicy lets in the workers and the listed peers on the REST port; a
    ServiceMonitor on the headless Service; every object valid. clientAuth=required is
    refused at render time, naming the value."""
    values = tmp_path / "values.yaml"
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    values.write_text(yaml.safe_dump({
        "rest": {"tls": {"secretName": "eos-tls", "clientAuth": "requested"}},
        "networkPolicy": {"enabled": True, "from": [prometheus]},
        "monitoring": {"serviceMonitor": True, "podMonitor": False},
    }))  # fmt: skip
    rendered = [d for d in yaml.safe_load_all(build.render(values)) if d]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered}
    props = worker_properties(docs)
    assert props["listeners"] == "https://0.0.0.0:8083"
    assert props["listeners.https.ssl.certfile"] == "/etc/eos/tls/tls.crt"
    assert props["listeners.https.ssl.client.auth"] == "requested"
    spec = pod(docs)["spec"]
    (container,) = spec["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS", probe
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    assert mount["mountPath"] == "/etc/eos/tls"
    assert next(v for v in spec["volumes"] if v["name"] == "tls")["secret"]["secretName"] == (
        "eos-tls"
    )
    policy = docs[("NetworkPolicy", "eos")]["spec"]
    (rule,) = policy["ingress"]
    assert rule["from"][0]["podSelector"]["matchLabels"] == policy["podSelector"]["matchLabels"]
    assert rule["from"][1] == prometheus
    assert rule["ports"] == [{"port": "rest", "protocol": "TCP"}]
    assert ("PodMonitor", "eos") not in docs
    monitor = docs[("ServiceMonitor", "eos")]["spec"]
    (endpoint,) = monitor["endpoints"]
    assert (endpoint["scheme"], endpoint["tlsConfig"]) == ("https", {"insecureSkipVerify": True})
    headless = docs[("Service", "eos-headless")]["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= headless.items()
    assert not monitor["selector"]["matchLabels"].items() <= (
        docs[("Service", "eos")]["metadata"]["labels"].items()
    )  # only the headless one: each worker scraped once
    for doc in rendered:
        if doc["kind"] not in CRDS:
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)

    values.write_text(
        yaml.safe_dump({"rest": {"tls": {"secretName": "t", "clientAuth": "required"}}})
    )
    with pytest.raises(build.HelmError, match=r"/rest/tls/clientAuth.*'none', 'requested'"):
        build.render(values)


def test_values_schema_names_a_misspelt_or_wrong_value(build: ModuleType, tmp_path: Path) -> None:
    """values.schema.json: helm refuses a value the chart does not have and a value of the
    wrong kind, each naming where it is; worker settings stay free-form."""
    values = tmp_path / "values.yaml"
    for wrong, said in (
        ({"replica": 3}, "additional properties 'replica' not allowed"),
        ({"replicas": "three"}, "/replicas"),
        ({"monitoring": {"interval": "15"}}, "/monitoring/interval"),
        ({"connectors": {"files": {"a.json": {"name": "a"}}}}, "/connectors/files/a.json"),
    ):
        values.write_text(yaml.safe_dump(wrong))
        with pytest.raises(build.HelmError, match=re.escape(said)):
            build.render(values)
    values.write_text(yaml.safe_dump({"workerConfig": {"offset.flush.timeout.ms": 3600000}}))
    assert "offset.flush.timeout.ms=3600000" in build.render(values)


def test_runbook_urls_under_a_published_docs_base(build: ModuleType, tmp_path: Path) -> None:
    """monitoring.runbookBaseUrl makes every alert's runbook_url absolute; each names a
    section of docs/operations.md that exists."""
    values = tmp_path / "values.yaml"
    base = "https://git.example.com/platform/eos/-/blob/v0.1.0/docs/"
    values.write_text(yaml.safe_dump({"monitoring": {"runbookBaseUrl": base}}))
    rendered = [d for d in yaml.safe_load_all(build.render(values)) if d]
    rule = next(d for d in rendered if d["kind"] == "PrometheusRule")
    alerts = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    urls = {r["alert"]: r["annotations"]["runbook_url"] for r in alerts}
    assert urls == {a: f"{base}operations.md#{a.lower()}" for a in urls}
    operations = (REPO / "docs" / "operations.md").read_text()
    sections = set(re.findall(r"^### (Eos\w+)$", operations, re.M))
    assert sections == set(urls)


def test_dashboards_as_configmaps_for_grafanas_sidecar(docs: dict[tuple[str, str], Doc]) -> None:
    sources = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))
    found = {}
    for (kind, _), config in docs.items():
        if kind == "ConfigMap" and config["metadata"]["labels"].get("grafana_dashboard") == "1":
            found.update(config["data"])
    assert found == {p.name: p.read_text().rstrip("\n") for p in sources}


def test_connectors_declared_in_values_are_a_mounted_configmap(
    build: ModuleType, tmp_path: Path
) -> None:
    """connectors.files: a ConfigMap mounted whole (no subPath: kubelet's updates reach
    the pods) at /etc/eos/connectors, which worker.properties names as connectors.dir;
    every object still valid."""
    orders = {"name": "orders", "state": "PAUSED",
              "config": {"connector.class": "FileSource", "topic": "orders"}}  # fmt: skip
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"connectors": {
        "files": {"orders.json": json.dumps(orders)}, "prune": True, "pollIntervalMs": 3600000,
    }}))  # fmt: skip
    rendered = [d for d in yaml.safe_load_all(build.render(values)) if d]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered}
    props = worker_properties(docs)
    assert props["connectors.dir"] == "/etc/eos/connectors"
    assert props["connectors.dir.prune"] == "true"
    assert props["connectors.dir.poll.interval.ms"] == "3600000"  # not 3.6e+06
    files = docs[("ConfigMap", "eos-connectors")]["data"]
    assert json.loads(files["orders.json"]) == orders
    spec = pod(docs)["spec"]
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "connectors")
    assert (mount["mountPath"], mount.get("subPath")) == ("/etc/eos/connectors", None)
    volume = next(v for v in spec["volumes"] if v["name"] == "connectors")
    assert volume["configMap"]["name"] == "eos-connectors"
    for doc in rendered:
        if doc["kind"] not in CRDS:
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_the_knobs_strimzi_users_reach_for(build: ModuleType, tmp_path: Path) -> None:
    """extraEnv, envFrom, extra volumes, a created service account, image pull secrets and
    topology spread reach the pods; a startup probe guards a slow start; all valid."""
    values = tmp_path / "values.yaml"
    spread = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
              "whenUnsatisfiable": "ScheduleAnyway",
              "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "eos"}}}  # fmt: skip
    values.write_text(yaml.safe_dump({
        "extraEnv": [{"name": "EOS_PRODUCER_CLIENT", "value": "librdkafka"}],
        "envFrom": [{"secretRef": {"name": "eos-env"}}],
        "extraVolumes": [{"name": "trust", "secret": {"secretName": "truststore"}}],
        "extraVolumeMounts": [{"name": "trust", "mountPath": "/etc/eos/trust", "readOnly": True}],
        "serviceAccount": {"create": True, "annotations": {"example.com/role": "eos"}},
        "imagePullSecrets": [{"name": "regcred"}],
        "topologySpreadConstraints": [spread],
    }))  # fmt: skip
    rendered = [d for d in yaml.safe_load_all(build.render(values)) if d]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered}
    spec = pod(docs)["spec"]
    container = spec["containers"][0]
    assert {"name": "EOS_PRODUCER_CLIENT", "value": "librdkafka"} in container["env"]
    assert container["envFrom"] == [{"secretRef": {"name": "eos-env"}}]
    assert {"name": "trust", "mountPath": "/etc/eos/trust", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert {"name": "trust", "secret": {"secretName": "truststore"}} in spec["volumes"]
    assert spec["serviceAccountName"] == "eos"
    assert docs[("ServiceAccount", "eos")]["metadata"]["annotations"] == {"example.com/role": "eos"}
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["topologySpreadConstraints"] == [spread]
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == "/health"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
    for doc in rendered:
        if doc["kind"] not in CRDS:
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_the_slim_image_with_the_memory_it_needs(build: ModuleType, tmp_path: Path) -> None:
    """image.variant=slim: the slim tag of the chart's version unless a tag is given, and
    the resources docs/deploy.md gives it; helm lint --strict and every object valid."""
    values = tmp_path / "values.yaml"
    slim = {"image": {"variant": "slim"},
            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                          "limits": {"memory": "512Mi"}}}  # fmt: skip
    values.write_text(yaml.safe_dump(slim))
    rendered = [d for d in yaml.safe_load_all(build.render(values)) if d]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered}
    (container,) = pod(docs)["spec"]["containers"]
    assert container["image"] == f"eos:{eos.__version__}-slim"
    assert container["resources"] == slim["resources"]
    for doc in rendered:
        if doc["kind"] not in CRDS:
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)
    assert "0 chart(s) failed" in build.helm("lint", "--strict", build.CHART, "-f", values)
    values.write_text(yaml.safe_dump({"image": {"variant": "slim", "tag": "1.2.3-slim-amd64"}}))
    assert 'image: "eos:1.2.3-slim-amd64"' in build.render(values)
    assert f'image: "eos:{eos.__version__}"' in build.render()
