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
# the Spark data source is found by name, with nothing registered by hand
cat > "$work/source.py" <<'PY'
import sys
import pyarrow as pa, pyarrow.parquet as pq
from dfs_cer import match_recognize
from dfs_cer.spark import local_session
t = pa.table({"ts": pa.array(range(0, 60_000, 1000), pa.timestamp("ms")), "v": list(range(60))})
pq.write_table(t, sys.argv[1])
sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS a, count(*) AS n "
       "PATTERN (A B+) WITHIN INTERVAL '10' SECOND DEFINE A AS v % 10 = 0, B AS v > PREV(v))")
spark = local_session(1)
got = spark.read.format("dfs_cer").option("query", sql).load(sys.argv[1]).toArrow()
assert got.to_pylist() == match_recognize(t, sql).to_pylist(), got
spark.stop()
print("the dfs_cer data source read", got.num_rows, "matches")
PY
if ! (cd "$work" && venv/bin/python source.py t.parquet > source.out 2>&1); then
  cat "$work/source.out"; exit 1
fi
echo "release check: $(basename "$sdist") builds $(basename "$wheel"), which installs into a fresh" \
  "virtual environment, runs dfs-cer demo and serves spark.read.format(\"dfs_cer\")"
