#!/usr/bin/env bash
# Builds the Sluice container image from the Containerfile at the repository root, pulling
# nothing from a registry: the static binary is built here (CGO_ENABLED=0) and copied into a
# `FROM scratch` image with the CA certificates and a passwd entry for the non-root user
# 65532 (as envoyproxy/ratelimit's distroless nonroot image has it).
#
# The build reuses Go's build cache: it passes no flag that changes how packages compile
# (-trimpath would: every package, the standard library too, compiled again, 507 of 507
# packages after a plain `go build ./cmd/sluice`; see docs/BENCHMARKS.md), only link flags.
# The version and commit are stamped with -ldflags -X (VCS stamping is often off:
# GOFLAGS=-buildvcs=false, or a build outside the checkout), and set as the image's OCI labels.
#
# Usage: scripts/image.sh TAG             (from anywhere; needs buildah, or docker with BUILDER=docker)
#        BUILDER=docker scripts/image.sh sluice:dev
#        VERSION=v1.4.0 scripts/image.sh sluice:v1.4.0    (default: git describe)
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:?usage: scripts/image.sh TAG}
builder=${BUILDER:-${BUILDAH:-buildah}}
ctx=$(mktemp -d /tmp/sluice-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo unknown)}
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
	revision="$revision-dirty"
fi

CGO_ENABLED=0 go build -ldflags="-s -w -X main.stampedVersion=$version -X main.stampedCommit=$revision" \
	-o "$ctx/ratelimit" ./cmd/sluice
cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
cp Containerfile "$ctx/Containerfile"

args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision" -f "$ctx/Containerfile" -t "$tag")
case "$builder" in
buildah | */buildah) "$builder" bud --isolation chroot --pull=never --layers=false "${args[@]}" "$ctx" >&2 ;;
*) "$builder" build "${args[@]}" "$ctx" >&2 ;;
esac
echo "$tag"
