#!/usr/bin/env bash
# Builds the Sluice container image from the Containerfile at the repository root, pulling
# nothing from a registry: the static binary is built here (CGO_ENABLED=0) and copied into a
# `FROM scratch` image with the CA certificates and a passwd entry for the non-root user
# 65532 (as envoyproxy/ratelimit's distroless nonroot image has it).
#
# Usage: scripts/image.sh TAG             (from anywhere; needs buildah, or docker with BUILDER=docker)
#        BUILDER=docker scripts/image.sh sluice:dev
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:?usage: scripts/image.sh TAG}
builder=${BUILDER:-${BUILDAH:-buildah}}
ctx=$(mktemp -d /tmp/sluice-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/ratelimit" ./cmd/sluice
cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
cp Containerfile "$ctx/Containerfile"

case "$builder" in
buildah | */buildah) "$builder" bud --isolation chroot --pull=never --layers=false -f "$ctx/Containerfile" -t "$tag" "$ctx" >&2 ;;
*) "$builder" build -f "$ctx/Containerfile" -t "$tag" "$ctx" >&2 ;;
esac
echo "$tag"
