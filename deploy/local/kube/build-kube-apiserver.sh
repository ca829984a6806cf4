#!/usr/bin/env bash
# Builds kube-apiserver from the Go module k8s.io/kubernetes into the cache, once:
#   build-kube-apiserver.sh VERSION CACHE_HOME
# leaves CACHE_HOME/bin/kube-apiserver and writes CACHE_HOME/bin.complete (this script's SHA-256
# and the version) only after a whole build, so an interrupted one is redone. k8s.io/kubernetes
# replaces its staging modules (k8s.io/api, k8s.io/client-go, ...) with ./staging/..., which a
# module outside its repository cannot see; a small wrapper module replaces them with the
# published k8s.io/* v0.<minor>.<patch> of the same release instead. deploy/local (kube.go) and
# install-deps.sh both call this script; it takes the cache's lock itself.
set -euo pipefail

version="${1:?usage: build-kube-apiserver.sh VERSION CACHE_HOME}"
home="${2:?usage: build-kube-apiserver.sh VERSION CACHE_HOME}"
want="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1) v$version"
log() { printf 'build-kube-apiserver: %s\n' "$*" >&2; }

mkdir -p "$home"
exec 9>"$home/.lock"
flock 9
if [[ $(cat "$home/bin.complete" 2>/dev/null) == "$want" && -x $home/bin/kube-apiserver ]]; then
	exit 0
fi

export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
src="$home/src"
rm -rf "$src" "$home/bin.complete"
mkdir -p "$src"
cd "$src"
log "downloading k8s.io/kubernetes v$version (module cache)"
gomod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
[[ -f $gomod ]] || { log "no go.mod for k8s.io/kubernetes v$version"; exit 1; }
staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/k8s\.io/.*#\1#p' "$gomod")
[[ -n $staging ]] || { log "no staging replacements found in $gomod"; exit 1; }
published="v0.${version#*.}" # 1.31.4 -> v0.31.4
{
	printf 'module slicemeter.local/kube-apiserver\n\ngo 1.22\n\nrequire k8s.io/kubernetes v%s\n\n' "$version"
	for m in $staging; do printf 'replace %s => %s %s\n' "$m" "$m" "$published"; done
} >go.mod
printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n' >tools.go
log "resolving modules"
go mod tidy >/dev/null 2>&1 || go get "k8s.io/kubernetes@v$version"
mkdir -p "$home/bin"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$version -X $pkg.gitMajor=${version%%.*} -X $pkg.gitMinor=$(cut -d. -f2 <<<"$version") -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
log "building kube-apiserver v$version into $home/bin (minutes)"
go build -trimpath -ldflags "$ldflags" -o "$home/bin/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$home/bin/kube-apiserver.tmp" "$home/bin/kube-apiserver"
printf '%s\n' "$want" >"$home/bin.complete"
log "built $home/bin/kube-apiserver"
