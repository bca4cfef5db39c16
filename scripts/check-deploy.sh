#!/usr/bin/env bash
# Checks the deployment files offline: hadolint lints the Dockerfile, and each kustomize layer
# under deploy/kubernetes is rendered (kubectl kustomize) and validated strictly (no unknown
# fields) against the Kubernetes schemas of the oldest and newest versions it supports.
# The checkers come from .venv (scripts/setup.sh --with-browser).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv/bin
for tool in "$venv/hadolint" "$venv/kubernetes-validate"; do
  if [ ! -x "$tool" ]; then
    echo "check-deploy.sh: $tool is missing; run scripts/setup.sh --with-browser" >&2
    exit 1
  fi
done
if ! command -v kubectl >/dev/null; then
  echo "check-deploy.sh: kubectl is needed to render the kustomize layers" >&2
  exit 1
fi

echo "==> hadolint Dockerfile" >&2
"$venv/hadolint" Dockerfile

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for layer in deploy/kubernetes/base deploy/kubernetes/postgres; do
  name=$(basename "$layer")
  echo "==> kubectl kustomize $layer, validated against Kubernetes 1.32 and 1.37" >&2
  kubectl kustomize "$layer" > "$out/$name.yaml"
  for version in 1.32.0 1.37.0; do
    "$venv/kubernetes-validate" --strict --quiet -k "$version" "$out/$name.yaml"
  done
done
echo "check-deploy.sh: Dockerfile and Kubernetes manifests pass" >&2
