#!/usr/bin/env bash
# Network mode for the benchmarks: each storage node in its own network namespace, joined to the
# compute node (the root namespace) by a veth pair whose both ends are shaped with tc.
#
#   sudo bench/net.sh up [--nodes 3] [--rate 1gbit] [--delay 0.5ms]
#   sudo bench/net.sh status
#   sudo bench/net.sh down
#
# Storage node i listens on 10.77.<i>.2 inside namespace dfs-sn<i>; the compute node reaches it
# through dfscn<i> (10.77.<i>.1). Rate limiting uses netem when the kernel has it (rate and
# delay), else tbf (rate only; the delay is reported as not applied). The configuration goes to
# /run/dfs-cer-net.json, which bench/run.py --net reads; wire bytes come from dfscn<i>'s counters.
# DFS_NET_PREFIX (default dfs) and DFS_NET_SUBNET (default 10.77) let a second set coexist (tests).
set -euo pipefail

P=${DFS_NET_PREFIX:-dfs}
SUBNET=${DFS_NET_SUBNET:-10.77}
[[ $P =~ ^[a-z]{1,6}$ ]] || { echo "error: DFS_NET_PREFIX must be 1-6 lower-case letters, got $P" >&2; exit 2; }
[[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}$ ]] || { echo "error: DFS_NET_SUBNET must look like 10.77, got $SUBNET" >&2; exit 2; }
STATE=/run/$P-cer-net.json
NODES=3 RATE=1gbit DELAY=0.5ms
cmd=${1:-}; shift || true
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) NODES=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    *) echo "error: unknown option $1 (use --nodes N --rate 1gbit --delay 0.5ms)" >&2; exit 2 ;;
  esac
done
[[ $NODES =~ ^[0-9]+$ && $NODES -ge 1 && $NODES -le 64 ]] || { echo "error: --nodes must be 1..64, got $NODES" >&2; exit 2; }

need_root() { [[ $(id -u) == 0 ]] || { echo "error: network namespaces need root (run with sudo)" >&2; exit 2; }; }

shape() {  # shape <netns or ""> <device>: prints "netem" or "tbf"
  local ns=$1 dev=$2 run=()
  [[ -n $ns ]] && run=(ip netns exec "$ns")
  if "${run[@]}" tc qdisc replace dev "$dev" root netem rate "$RATE" delay "$DELAY" limit 100000 2>/dev/null; then
    echo netem
  else
    "${run[@]}" tc qdisc replace dev "$dev" root tbf rate "$RATE" burst 512kb latency 200ms
    echo tbf
  fi
}

down() {
  for ns in $(ip netns list 2>/dev/null | awk -v p="^$P-sn[0-9]+" '$1 ~ p {print $1}'); do ip netns del "$ns"; done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' -v p="^${P}cn[0-9]+" '$2 ~ p {print $2}' | cut -d@ -f1); do
    ip link del "$dev" 2>/dev/null || true
  done
  rm -f "$STATE"
}

case $cmd in
  up)
    need_root
    down
    hosts=() qdisc=
    for ((i = 0; i < NODES; i++)); do
      ns=$P-sn$i cn=${P}cn$i sn=${P}sn$i
      ip netns add "$ns"
      ip link add "$cn" type veth peer name "$sn"
      ip link set "$sn" netns "$ns"
      ip addr add "$SUBNET.$i.1/24" dev "$cn"
      ip link set "$cn" up
      ip netns exec "$ns" ip addr add "$SUBNET.$i.2/24" dev "$sn"
      ip netns exec "$ns" ip link set "$sn" up
      ip netns exec "$ns" ip link set lo up
      qdisc=$(shape "" "$cn")
      shape "$ns" "$sn" >/dev/null
      hosts+=("\"$SUBNET.$i.2\"")
    done
    delay_applied=false; [[ $qdisc == netem ]] && delay_applied=true
    printf '{"nodes": %d, "rate": "%s", "delay": "%s", "qdisc": "%s", "delay_applied": %s, "hosts": [%s], "namespaces": [%s], "devices": [%s]}\n' \
      "$NODES" "$RATE" "$DELAY" "$qdisc" "$delay_applied" "$(IFS=,; echo "${hosts[*]}")" \
      "$(for ((i = 0; i < NODES; i++)); do printf '%s"%s-sn%d"' "$([[ $i -gt 0 ]] && echo ,)" "$P" "$i"; done)" \
      "$(for ((i = 0; i < NODES; i++)); do printf '%s"%scn%d"' "$([[ $i -gt 0 ]] && echo ,)" "$P" "$i"; done)" > "$STATE"
    [[ $qdisc == netem ]] || echo "warning: this kernel has no netem qdisc; links are limited to $RATE with tbf, no added delay" >&2
    cat "$STATE"
    ;;
  down) need_root; down ;;
  status) if [[ -f $STATE ]]; then cat "$STATE"; else echo '{"nodes": 0}'; fi ;;
  *) echo "usage: bench/net.sh up|down|status [--nodes N] [--rate 1gbit] [--delay 0.5ms]" >&2; exit 2 ;;
esac
