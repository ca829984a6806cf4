#!/usr/bin/env bash
# Installs what slicemeter's demo and tests start or call, on Debian 12 as root; only what is
# missing, so a second run takes about a second.
#
#   install-deps.sh [demo|test] [--list]
#
# demo: only what `slicemeter demo` starts, ClickHouse 18.16 (its server and client). The demo's
#       Kafka broker is kfake, in the process: no Java, no jars.
# test (the default): the demo's, and what the tests start or call: protoc, Prometheus,
#       Alertmanager, kcat, Java 17 and Maven (for the Kafka broker), etcd, Chromium (the
#       statement's browser test and PDF), chDB, the FOCUS validator (a virtual environment in
#       the cache), the Kafka and ZooKeeper jars in the cache, and kube-apiserver and helm built
#       from their Go modules into the cache.
# --list prints what the profile installs, one "KIND NAME" a line (apt, pip, venv, maven,
#       build), installed or not, and changes nothing: deploy/local's TestInstallDepsDemo reads
#       it through `make -n demo` to keep test-only tools out of the demo's path.
#
# The services installed here are never used: the harness (deploy/local) starts its own
# ClickHouse, Kafka and Prometheus on free loopback ports. Package installs are kept from starting
# system services (ClickHouse on :9000, Prometheus on :9090) while this script runs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kafka_version=4.4.0
zookeeper_version=3.9.5 # deploy/local ZooKeeperVersion; ClickHouse 18.16 clusters need ZooKeeper
kube_version=1.31.4  # deploy/local KubeAPIServerVersion
helm_version=3.22.0  # deploy/local HelmVersion
demo_packages=(clickhouse-server clickhouse-client)
test_packages=(protobuf-compiler prometheus prometheus-alertmanager kcat openjdk-17-jre-headless maven python3-pip
	python3-venv etcd-server chromium)

log() { printf 'install-deps: %s\n' "$*" >&2; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

profile=test
list=false
for arg in "$@"; do
	case $arg in
	demo | test) profile=$arg ;;
	--list) list=true ;;
	-h | --help)
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*)
		log "unknown argument \"$arg\": expected demo, test or --list"
		exit 2
		;;
	esac
done
packages=("${demo_packages[@]}")
if [[ $profile == test ]]; then
	packages+=("${test_packages[@]}")
fi

if $list; then
	printf 'apt %s\n' "${packages[@]}"
	if [[ $profile == test ]]; then
		printf '%s\n' "pip chdb" "venv focus-validator==1.0.0" "maven kafka-$kafka_version" "maven zookeeper-$zookeeper_version" \
			"build kube-apiserver-$kube_version" "build helm-$helm_version"
	fi
	exit 0
fi

missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
	if [[ $(id -u) -ne 0 ]]; then
		log "missing packages: ${missing[*]}; run this script as root (or: sudo apt-get install -y ${missing[*]})"
		exit 1
	fi
	# policy-rc.d exit 101 tells invoke-rc.d and deb-systemd-invoke not to start services.
	policy=/usr/sbin/policy-rc.d
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	export DEBIAN_FRONTEND=noninteractive
	log "apt-get update"
	apt-get update -q
	log "installing ${missing[*]}"
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ $profile == demo ]]; then
	log "all the demo's dependencies present (make test installs the tests' own)"
	exit 0
fi

# chDB checks our SQL against current ClickHouse (deploy/local/chdb_check.py).
if ! python3 -c 'import chdb' 2>/dev/null; then
	log "pip install chdb"
	if ! out=$(python3 -m pip install --quiet chdb 2>&1); then
		if grep -q externally-managed-environment <<<"$out"; then
			# Debian 12's system Python refuses pip without this flag (PEP 668).
			python3 -m pip install --quiet --break-system-packages chdb
		else
			printf '%s\n' "$out" >&2
			exit 1
		fi
	fi
	python3 -c 'import chdb' # fail here, not in the tests, if it still cannot be imported
fi

# The FinOps Foundation's FOCUS validator checks the FOCUS export (attribution/focus). Only
# 1.0.0 runs on Python 3.11, with multimethod<1.11; it pins numpy<2, which the system's pyarrow
# (chDB's) does not take, so it lives in a virtual environment of its own in the cache, with a
# pyarrow of its numpy for Parquet files: deploy/local's FocusValidator finds it there.
focus_venv="${SLICEMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slicemeter}/focus-validator-1.0.0"
if [[ ! -x $focus_venv/bin/focus-validator ]]; then
	log "pip install focus-validator==1.0.0 into $focus_venv"
	rm -rf "$focus_venv"
	python3 -m venv "$focus_venv"
	"$focus_venv/bin/pip" install --quiet focus-validator==1.0.0 'multimethod<1.11' 'pyarrow<18'
	"$focus_venv/bin/focus-validator" --supported-versions >/dev/null # fail here, not in the tests
fi

# The Kafka broker's jars, in the same place and with the same completion marker and lock as
# deploy/local's KafkaLibs, so the tests find them ready.
cache="${SLICEMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slicemeter}"
home="$cache/kafka-$kafka_version"
want=$(sha256sum "$here/kafka/pom.xml" | cut -d' ' -f1)
if [[ $(cat "$home/libs.complete" 2>/dev/null) != "$want" ]]; then
	mkdir -p "$home"
	(
		flock 9
		if [[ $(cat "$home/libs.complete" 2>/dev/null) != "$want" ]]; then
			log "fetching the Kafka $kafka_version jars from Maven Central into $home/libs"
			cp "$here/kafka/pom.xml" "$home/pom.xml"
			rm -rf "$home/libs.tmp"
			(cd "$home" && mvn -q -B -Dstyle.color=never -f pom.xml dependency:copy-dependencies -DoutputDirectory="$home/libs.tmp")
			rm -rf "$home/libs"
			mv "$home/libs.tmp" "$home/libs"
			printf '%s\n' "$want" >"$home/libs.complete"
		fi
	) 9>"$home/.lock"
fi

# The ZooKeeper server's jars (clustered ClickHouse: Replicated tables, ON CLUSTER DDL), the same
# way, matching deploy/local's ZooKeeperLibs.
zk_home="$cache/zookeeper-$zookeeper_version"
zk_want=$(sha256sum "$here/zookeeper/pom.xml" | cut -d' ' -f1)
if [[ $(cat "$zk_home/libs.complete" 2>/dev/null) != "$zk_want" ]]; then
	mkdir -p "$zk_home"
	(
		flock 9
		if [[ $(cat "$zk_home/libs.complete" 2>/dev/null) != "$zk_want" ]]; then
			log "fetching the ZooKeeper $zookeeper_version jars from Maven Central into $zk_home/libs"
			cp "$here/zookeeper/pom.xml" "$zk_home/pom.xml"
			rm -rf "$zk_home/libs.tmp"
			(cd "$zk_home" && mvn -q -B -Dstyle.color=never -f pom.xml dependency:copy-dependencies -DoutputDirectory="$zk_home/libs.tmp")
			rm -rf "$zk_home/libs"
			mv "$zk_home/libs.tmp" "$zk_home/libs"
			printf '%s\n' "$zk_want" >"$zk_home/libs.complete"
		fi
	) 9>"$zk_home/.lock"
fi

# kube-apiserver, built from k8s.io/kubernetes by the same script deploy/local's
# KubeAPIServerBinary runs (it checks its own marker and lock): minutes the first time.
bash "$here/kube/build-kube-apiserver.sh" "$kube_version" "$cache/kube-apiserver-$kube_version"

# helm, for the chart's tests, the way deploy/local's HelmBinary builds it.
helm_home="$cache/helm-$helm_version"
if [[ $(cat "$helm_home/bin.complete" 2>/dev/null) != "v$helm_version" ]]; then
	mkdir -p "$helm_home"
	(
		flock 9
		if [[ $(cat "$helm_home/bin.complete" 2>/dev/null) != "v$helm_version" ]]; then
			log "building helm $helm_version into $helm_home/bin"
			rm -rf "$helm_home/bin.tmp"
			(cd "$helm_home" && GOBIN="$helm_home/bin.tmp" GOWORK=off GOFLAGS= CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@v$helm_version")
			rm -rf "$helm_home/bin"
			mv "$helm_home/bin.tmp" "$helm_home/bin"
			printf 'v%s\n' "$helm_version" >"$helm_home/bin.complete"
		fi
	) 9>"$helm_home/.lock"
fi

log "all dependencies present"
