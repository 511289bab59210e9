#!/usr/bin/env bash
# Fetch the Spark connector jars and the Apache Kafka broker with Maven, as Maven is configured on
# this machine, into a git-ignored folder (default .jars/): one subfolder per pom under
# tools/maven/. `make test` and `make demo-kafka` depend on it; `make demo` does not.
# Each folder is filled aside and moved into place whole, so an interrupted fetch leaves nothing
# half-copied; a failed resolution is tried once more with -U (Maven caches a failure otherwise).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "${1:-$root/.jars}"
dest="$(cd "${1:-$root/.jars}" && pwd)"  # absolute: Maven resolves a relative outputDirectory against the pom

fail() {
    echo "fetch-jars: $*" >&2
    echo "fetch-jars: the Kafka tests (make test) and make demo-kafka need these jars; make demo does not." >&2
    exit 1
}

command -v mvn >/dev/null 2>&1 || fail "mvn (Apache Maven) is not on the PATH"
command -v java >/dev/null 2>&1 || fail "java is not on the PATH"

for pom in "$root"/tools/maven/*/pom.xml; do
    name="$(basename "$(dirname "$pom")")"
    partial="$dest/.$name.partial"
    log="$dest/.$name.log"
    fetched=""
    for force in "" "-U"; do
        rm -rf "$partial"
        # shellcheck disable=SC2086  # $force is empty or one flag
        if mvn -B -q $force -f "$pom" dependency:copy-dependencies -DoutputDirectory="$partial" >"$log" 2>&1; then
            fetched=yes
            break
        fi
        echo "fetch-jars: resolving $name failed${force:+ again} (full output in $log):" >&2
        grep -m 2 '\[ERROR\]' "$log" >&2 || tail -n 15 "$log" >&2
    done
    [ -n "$fetched" ] || fail "could not resolve the $name jars (tools/maven/$name/pom.xml) with Maven: not served, or Maven's repository unreachable from this machine"
    ls "$partial"/*.jar >/dev/null 2>&1 || fail "Maven copied no jar for $name (tools/maven/$name/pom.xml)"
    rm -rf "${dest:?}/$name"
    mv "$partial" "$dest/$name"
    echo "fetch-jars: $name: $(ls "$dest/$name" | wc -l) jars in $dest/$name"
done
touch "$dest/.fetched"
