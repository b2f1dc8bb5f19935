#!/usr/bin/env python3
"""Parses every manifest in deploy/k8s/ and checks the fields that matter for
Tidal: the Multus SR-IOV network, and in each training pod the network
annotation, IPC_LOCK, hugepages (request = limit, a HugePages volume), the
RDMA VF resource, TIDAL_IB_HCA and the bootstrap interface on the management
network. Then tries `kubectl create --dry-run=client`, which needs an API
server for discovery: without one that part is reported as skipped and
kubectl still decodes every manifest offline (`kubectl label --local`)."""
import glob
import json
import os
import subprocess
import sys

import yaml

RESOURCE = "nvidia.com/rdma_vf"
NETWORK = "tidal-rdma"
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


def pod_templates(doc):
    kind = doc["kind"]
    spec = doc["spec"]
    if kind == "Job":
        yield "Job", spec["template"]
    elif kind == "PyTorchJob":
        for role, rs in spec["pytorchReplicaSpecs"].items():
            yield role, rs["template"]
    elif kind == "MPIJob":
        for role, rs in spec["mpiReplicaSpecs"].items():
            if role != "Launcher":
                yield role, rs["template"]


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def check_pod(where, tmpl):
    ann = tmpl.get("metadata", {}).get("annotations", {})
    check(NETWORK in ann.get("k8s.v1.cni.cncf.io/networks", ""),
          f"{where}: no Multus annotation for {NETWORK}")
    spec = tmpl["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    check(any(v.get("emptyDir", {}).get("medium") == "HugePages" for v in volumes.values()),
          f"{where}: no HugePages volume")
    for c in spec["containers"]:
        w = f"{where}/{c['name']}"
        caps = c.get("securityContext", {}).get("capabilities", {}).get("add", [])
        check("IPC_LOCK" in caps, f"{w}: no IPC_LOCK capability")
        res = c.get("resources", {})
        req, lim = res.get("requests", {}), res.get("limits", {})
        check(RESOURCE in lim, f"{w}: no {RESOURCE} limit")
        hp = [k for k in lim if k.startswith("hugepages-")]
        check(hp, f"{w}: no hugepages limit")
        for k in hp:
            check(req.get(k) == lim[k], f"{w}: {k} request {req.get(k)} != limit {lim[k]}")
        env = env_of(c)
        check(env.get("TIDAL_IB_HCA"), f"{w}: no TIDAL_IB_HCA")
        ifname = env.get("TIDAL_SOCKET_IFNAME") or ""
        check(ifname.lstrip("=") == "eth0",
              f"{w}: TIDAL_SOCKET_IFNAME is '{ifname}', not the management eth0")
        mounts = {m["name"] for m in c.get("volumeMounts", [])}
        check(any(volumes.get(m, {}).get("emptyDir", {}).get("medium") == "HugePages"
                  for m in mounts), f"{w}: HugePages volume not mounted")


def main():
    root = sys.argv[1]
    files = sorted(glob.glob(os.path.join(root, "*.yaml")))
    check(files, f"no manifests in {root}")
    kinds = {}
    for f in files:
        with open(f) as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d]
        for d in docs:
            kinds.setdefault(d["kind"], []).append((f, d))
    for want in ("NetworkAttachmentDefinition", "Job", "PyTorchJob", "MPIJob"):
        check(want in kinds, f"no {want} manifest")
    for f, nad in kinds.get("NetworkAttachmentDefinition", []):
        check(nad["metadata"]["name"] == NETWORK, f"{f}: network named {nad['metadata']['name']}")
        check(nad["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/resourceName")
              == RESOURCE, f"{f}: resourceName is not {RESOURCE}")
        cni = json.loads(nad["spec"]["config"])
        check(cni.get("type") == "sriov", f"{f}: CNI type {cni.get('type')}, not sriov")
        check("ipam" in cni, f"{f}: no ipam")
    pods = 0
    for kind in ("Job", "PyTorchJob", "MPIJob"):
        for f, d in kinds.get(kind, []):
            for role, tmpl in pod_templates(d):
                check_pod(f"{os.path.basename(f)} {kind}/{role}", tmpl)
                pods += 1
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"PASS: {len(files)} manifests, {pods} training pod templates checked")

    try:
        r = subprocess.run(["kubectl", "create", "--dry-run=client", "-o", "name", "-f", root],
                           capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        print("kubectl dry-run: SKIPPED (kubectl not installed)")
        return 0
    if r.returncode != 0 and ("connection refused" in r.stderr or "openapi" in r.stderr):
        print("kubectl dry-run: SKIPPED (kubectl --dry-run=client still asks an API server for "
              "discovery and OpenAPI; none here)")
        return kubectl_offline_decode(root, len(docs_seen(files)))
    if r.returncode != 0:
        print("FAIL: kubectl create --dry-run=client:", r.stderr)
        return 1
    print("kubectl dry-run: PASS\n" + r.stdout)
    return 0


def docs_seen(files):
    """Every non-empty YAML document in the manifests, as python-yaml reads them."""
    docs = []
    for f in files:
        with open(f) as fh:
            docs += [d for d in yaml.safe_load_all(fh) if d]
    return docs


def kubectl_offline_decode(root, expected):
    """Without an API server, `kubectl label --local` still makes kubectl itself decode every
    manifest (its YAML-to-JSON conversion and object metadata), offline. Each object must come
    back named, so a document kubectl cannot read fails here even when python-yaml accepted it."""
    r = subprocess.run(["kubectl", "label", "--local", "-f", root, "tidal-manifest-check=1",
                        "-o", "name"], capture_output=True, text=True, timeout=60)
    names = [n for n in r.stdout.split() if "/" in n]
    if r.returncode != 0 or len(names) != expected:
        print(f"FAIL: kubectl label --local decoded {len(names)} of {expected} objects:",
              r.stderr.strip())
        return 1
    print(f"kubectl offline decode (label --local): PASS, {len(names)} objects: " + " ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
