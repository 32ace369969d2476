#!/usr/bin/env bash
# Make sure a Java runtime >= 17 is on PATH (Spark needs it); install one with apt-get if not.
set -euo pipefail

required=17

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  local v
  v=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
  v=${v#1.}           # 1.8.0 -> 8.0
  echo "${v%%[.+-]*}"
}

major=$(java_major)
if [ "${major:-0}" -ge "$required" ] 2>/dev/null; then
  exit 0
fi

echo "Java >= $required not found (found: ${major:-none}); installing OpenJDK with apt-get" >&2
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: apt-get is not available; install Java $required or newer and put it on PATH" >&2
  exit 1
fi
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; else
    echo "error: installing Java needs root; run: apt-get install -y openjdk-17-jre-headless" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
for pkg in openjdk-17-jre-headless openjdk-21-jre-headless default-jre-headless; do
  if $sudo_cmd apt-get install -y -qq "$pkg" >/dev/null 2>&1; then
    break
  fi
done
major=$(java_major)
if [ "${major:-0}" -lt "$required" ]; then
  echo "error: could not install Java >= $required with apt-get" >&2
  exit 1
fi
echo "installed Java $major" >&2
