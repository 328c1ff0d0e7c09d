#!/usr/bin/env bash
# homa-perf over AF_XDP, TAP and AF_PACKET, and kernel TCP, side by side on
# one veth pair between two network namespaces (root). For each device:
# 100-byte RPCs (100-byte responses), closed loop with 32 outstanding, and
# 1 MB requests (100-byte responses), closed loop with 4 outstanding;
# every byte checked. The devices take
# turns, ROUNDS times; the table gives each figure's median: RPCs/s,
# goodput of the requests, the client's and server's CPU seconds per RPC
# (user + system), the machine's softirq seconds per RPC (the kernel's
# share: veth, bridge, XDP; other users of the machine add to it), and
# each rate's ratio to TAP's and to TCP's.
# Every homa-perf runs at nice -15, so that other jobs on a shared machine
# do not starve it; Homa's RESEND timer is 15 ms and its timeout 1 s, as in
# the testbed (docs/testbed.md says why).
# Usage: tools/device-bench.sh HOMA_PERF [SECONDS] [ROUNDS]
# (DEVICES="xdp tap" picks devices). HOMA_PERF must be built with
# --features homa-tools/xdp.
set -euo pipefail
perf=$(realpath "$1")
secs=${2:-5}
rounds=${3:-3}
out_small=32
out_large=4
homa=(--resend-ticks 15 --timeout-ticks 1000)
a=hpdev-a-$$
b=hpdev-b-$$
work=$(mktemp -d -t device-bench.XXXXXX)
cleanup() {
  ip netns pids "$a" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$b" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ns in "$a" "$b"; do
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$a" link add xa type veth peer name xb netns "$b"
ip -n "$a" link set xa up
ip -n "$b" link set xb up

# Kernel TCP's addresses, on the veth itself or on the bridge the TAP run
# puts it in.
tcp_addrs() { # add|del DEV_A DEV_B
  ip -n "$a" addr "$1" 10.88.0.12/24 dev "$2"
  ip -n "$b" addr "$1" 10.88.0.13/24 dev "$3"
}
bridges() { # add|del
  for ns in "$a" "$b"; do
    if [ "$1" = add ]; then
      ip -n "$ns" link add br0 type bridge
      ip -n "$ns" link set br0 up
      ip -n "$ns" link set "$([ "$ns" = "$a" ] && echo xa || echo xb)" master br0
    else
      ip -n "$ns" link del br0
    fi
  done
}

softirq() { awk '$1 == "cpu" { print $8 }' /proc/stat; }

# run DEVICE SIZE OUTSTANDING: one client/server pair for $secs seconds;
# prints "rate goodput cpu_per_rpc_us softirq_per_rpc_us".
run() {
  local dev=$1 size=$2 outstanding=$3 sargs cargs
  case $dev in
    xdp) sargs=(--xdp xb --ip 10.88.0.3/24 "${homa[@]}"); cargs=(--xdp xa --ip 10.88.0.2/24 --server 10.88.0.3:500 "${homa[@]}") ;;
    packet) sargs=(--iface xb --ip 10.88.0.3/24 "${homa[@]}"); cargs=(--iface xa --ip 10.88.0.2/24 --server 10.88.0.3:500 "${homa[@]}") ;;
    tap) sargs=(--tap t0 --bridge br0 --ip 10.88.0.3/24 "${homa[@]}"); cargs=(--tap t0 --bridge br0 --ip 10.88.0.2/24 --server 10.88.0.3:500 "${homa[@]}") ;;
    tcp) sargs=(--tcp --listen 10.88.0.13:5000); cargs=(--tcp --server 10.88.0.13:5000) ;;
  esac
  ip netns exec "$b" nice -n -15 "$perf" server "${sargs[@]}" --duration $((secs + 30)) --json --quiet \
    >"$work/server.json" 2>"$work/server.err" &
  local server=$!
  for _ in $(seq 600); do grep -q "server ready" "$work/server.err" && break; sleep 0.1; done
  grep -q "server ready" "$work/server.err" || { cat "$work/server.err" >&2; return 1; }
  local s0
  s0=$(softirq)
  ip netns exec "$a" nice -n -15 "$perf" client "${cargs[@]}" --size "$size" --reply-len 100 \
    --outstanding "$outstanding" --duration "$secs" --drain 30 --json --quiet >"$work/client.json" 2>"$work/client.err" ||
    true # a failed RPC is reported below, with the counts
  local s1
  s1=$(softirq)
  kill -TERM "$server"
  wait "$server" || { cat "$work/server.err" >&2; exit 1; }
  local hz
  hz=$(getconf CLK_TCK)
  [ -s "$work/client.json" ] || { cat "$work/client.err" >&2; return 1; }
  dev=$dev size=$size jq -r -s --argjson soft $(((s1 - s0))) --argjson hz "$hz" '
    .[0] as $c | .[1] as $s |
    if $c.failed + $c.corrupt + $c.unfinished + $s.corrupt > 0 then
      error("\(env.dev) \(env.size) B: failed \($c.failed), corrupt \($c.corrupt), unfinished \($c.unfinished), server corrupt \($s.corrupt)")
    else . end |
    ($c.completed / $c.duration_s) as $rate |
    [$rate, $c.request_bytes * 8 / $c.duration_s / 1e6,
     ($c.cpu_user_s + $c.cpu_sys_s + $s.cpu_user_s + $s.cpu_sys_s) / $c.completed * 1e6,
     $soft / $hz / $c.completed * 1e6] | map(tostring) | join(" ")' "$work/client.json" "$work/server.json"
}

declare -A rate goodput cpu soft
for round in $(seq "$rounds"); do
  for dev in ${DEVICES:-xdp tap packet tcp}; do
    case $dev in
      tap) bridges add ;;
      tcp) tcp_addrs add xa xb ;;
    esac
    for w in small large; do
      if [ $w = small ]; then size=100; n=$out_small; else size=1000000; n=$out_large; fi
      out=$(run $dev $size $n) || {
        echo "device-bench: $dev $size B failed; the server said:" >&2
        cat "$work/server.err" >&2
        echo "the client said:" >&2
        cat "$work/client.err" "$work/client.json" >&2
        exit 1
      }
      read -r r g c s <<<"$out"
      rate[$dev.$w]+="$r " goodput[$dev.$w]+="$g " cpu[$dev.$w]+="$c " soft[$dev.$w]+="$s "
      echo "round $round $dev $w: $r RPC/s, $g Mbit/s, $c us CPU/RPC, $s us softirq/RPC" >&2
    done
    case $dev in
      tap) bridges del ;;
      tcp) tcp_addrs del xa xb ;;
    esac
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { tr ' ' '\n' | grep . | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f-%.0f", lo, hi }'; }
declare -A m
for k in "${!rate[@]}"; do
  m[rate.$k]=$(median <<<"${rate[$k]}") m[goodput.$k]=$(median <<<"${goodput[$k]}")
  m[cpu.$k]=$(median <<<"${cpu[$k]}") m[soft.$k]=$(median <<<"${soft[$k]}")
done
ratio() { echo "$1 / $2" | bc -l; }
printf '\nmedians of %s rounds of %s s each; load average before: %s\n' "$rounds" "$secs" "$load0"
printf '%-8s %11s %7s %7s %11s %12s %11s %7s %7s   %s\n' device "100B RPC/s" "x TAP" "x TCP" \
  "us CPU/RPC" "us sirq/RPC" "1MB Mbit/s" "x TAP" "x TCP" "(RPC/s and Mbit/s, lowest-highest)"
for dev in ${DEVICES:-xdp tap packet tcp}; do
  printf '%-8s %11.0f %7.2f %7.2f %11.1f %12.1f %11.1f %7.2f %7.2f   %s, %s\n' "$dev" \
    "${m[rate.$dev.small]}" "$(ratio "${m[rate.$dev.small]}" "${m[rate.tap.small]:-0}")" \
    "$(ratio "${m[rate.$dev.small]}" "${m[rate.tcp.small]:-0}")" \
    "${m[cpu.$dev.small]}" "${m[soft.$dev.small]}" "${m[goodput.$dev.large]}" \
    "$(ratio "${m[goodput.$dev.large]}" "${m[goodput.tap.large]:-0}")" \
    "$(ratio "${m[goodput.$dev.large]}" "${m[goodput.tcp.large]:-0}")" \
    "$(spread <<<"${rate[$dev.small]}")" "$(spread <<<"${goodput[$dev.large]}")"
done
