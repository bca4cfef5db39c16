#!/usr/bin/env python3
"""Builds core/tests/fixtures/public/nestful.json, the public search evaluation set, from the
PyPI package nestful-wrapper 0.1.7 (IBM's NESTFUL data_v1, Apache-2.0): every tool's name,
vendor, description and parameters, and every query with the tools its gold calls use.
Downloads the wheel from PyPI, checks its hash, and keeps only what the search evaluation reads
(the 98 MB of sample responses are dropped). Re-run it to regenerate the fixture."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile

WHEEL = "nestful_wrapper-0.1.7-py3-none-any.whl"
SHA256 = "7e7b34b0491d6fb26e9670d6fca93f39a7cc9475e25962d39633889a04e26fe4"
OUT = os.path.join(os.path.dirname(__file__), "..", "core", "tests", "fixtures", "public", "nestful.json")
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


def main():
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
