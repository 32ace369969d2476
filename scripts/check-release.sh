#!/usr/bin/env bash
# The release check (make release-check, part of make test): build the sdist and the wheel (the
# wheel from the sdist), install the wheel with its Spark extra into a fresh virtual environment
# and run `dfs-cer demo` there on a small sample. About 3 minutes, most of it the first
# compilation of the engines in the new environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d -t dfs-cer-release-XXXXXX)"
trap 'rm -rf "$work"' EXIT
if ! .venv/bin/python -m build --outdir "$work/dist" . > "$work/build.log" 2>&1; then
  cat "$work/build.log"; exit 1
fi
wheel="$(ls "$work"/dist/*.whl)"
sdist="$(ls "$work"/dist/*.tar.gz)"
"$PYTHON" -m venv "$work/venv"
if ! "$work/venv/bin/python" -m pip install --disable-pip-version-check -q "$wheel[spark]" \
    > "$work/install.log" 2>&1; then
  cat "$work/install.log"; exit 1
fi
want="$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("dfs-cer"))')"
got="$("$work/venv/bin/dfs-cer" --version)"
[[ "$got" == "dfs-cer, version $want" ]] || { echo "release check: $got, expected $want"; exit 1; }
if ! (cd "$work" && venv/bin/dfs-cer demo --events 2000 --data-dir demo \
      --strategies push_down,dfs > demo.out 2> demo.err); then
  cat "$work/demo.out" "$work/demo.err"; exit 1
fi
grep -q "DFS moves" "$work/demo.out" || { cat "$work/demo.out"; exit 1; }
echo "release check: $(basename "$sdist") builds $(basename "$wheel"), which installs into a fresh" \
  "virtual environment and runs dfs-cer demo"
