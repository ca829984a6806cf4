#!/usr/bin/env bash
# slicemeter device check: the exporter against this machine's real NVML for DURATION at
# INTERVAL under a generated PyTorch load; records a capture, replays it, compares the figures
# with nvidia-smi and prints a summary. Only queries the GPU: it never changes its settings
# (MIG mode, clocks, power limits, persistence, compute mode) and needs no Go toolchain: it runs
# the x86-64 cgo binary built elsewhere by `make device-build`.
#
# Environment: BIN (default bin/slicemeter-device), OUT (results; default /tmp/slicemeter-device-check),
# DURATION (30s), INTERVAL (100ms), PORT (19835), GPU (the index loaded and compared; 0),
# NVML_LIBRARY (the path of libnvidia-ml.so.1 when it is not where the driver usually puts it).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-bin/slicemeter-device}
OUT=${OUT:-${TMPDIR:-/tmp}/slicemeter-device-check}
DURATION=${DURATION:-30s}
INTERVAL=${INTERVAL:-100ms}
PORT=${PORT:-19835}
GPU=${GPU:-0}
mkdir -p "$OUT"
log() { echo "[device-check $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/check.log"; }
die() { log "FAILED: $*"; exit 1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

secs=${DURATION%s}
[[ "$secs" =~ ^[0-9]+$ ]] || die "DURATION=$DURATION: expected whole seconds like 30s"

# 1. The driver and the binary.
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
[ -x "$BIN" ] || die "$BIN missing: run 'make device-build' on a machine with Go and carry bin/ here"
lib=${NVML_LIBRARY:-$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')}
if [ -z "$lib" ]; then
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64 /run/nvidia/driver/usr/lib/x86_64-linux-gnu; do
    [ -e "$d/libnvidia-ml.so.1" ] && lib="$d/libnvidia-ml.so.1" && break
  done
fi
[ -n "$lib" ] || die "libnvidia-ml.so.1 not found by ldconfig nor in the usual driver directories"
log "NVML: $lib"
if ! "$BIN" --help >/dev/null 2>"$OUT/binary.err"; then
  die "$BIN does not run here (glibc too old? it needs GLIBC_2.34): $(head -c 300 "$OUT/binary.err")"
fi
nvidia-smi -L | tee "$OUT/nvidia-smi-L.txt"
nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.total,mig.mode.current,power.limit,clocks.max.sm \
  --format=csv > "$OUT/gpus.csv" 2>&1 || true
cat "$OUT/gpus.csv"
# The PCI addresses, compared with the exporter's pci_bus_id (every nvidia-smi has pci.bus_id).
nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader > "$OUT/nvidia-smi-pci.csv" 2>&1 || true

# The health fields this nvidia-smi can query (names differ between versions, and one unknown
# field fails the whole query): compare.py compares those the exporter reads too.
smi_help=$(nvidia-smi --help-query-gpu 2>/dev/null || true)
hfields=()
for f in driver_version pcie.link.gen.current pcie.link.width.current temperature.memory memory.free memory.reserved \
  utilization.memory utilization.encoder utilization.decoder remapped_rows.correctable remapped_rows.uncorrectable \
  remapped_rows.pending remapped_rows.failure clocks_event_reasons.active clocks_event_reasons.sw_power_cap \
  clocks_event_reasons.sw_thermal_slowdown clocks_event_reasons.hw_thermal_slowdown clocks_event_reasons.hw_slowdown; do
  if grep -qF "\"$f\"" <<<"$smi_help"; then
    hfields+=("$f")
  elif [[ $f == clocks_event_reasons.* ]] && grep -qF "\"${f/event/throttle}\"" <<<"$smi_help"; then
    hfields+=("${f/event/throttle}") # before r535
  fi
done
printf '%s\n' "${hfields[@]}" > "$OUT/nvidia-smi-health.fields"
log "nvidia-smi health fields: ${#hfields[@]} (${hfields[*]})"

# 2. Load: a PyTorch matmul loop on one GPU, for the whole run plus a margin.
load_note="none"
if CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$GPU python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$GPU timeout $((secs + 25)) python3 - >"$OUT/load.log" 2>&1 <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
end, n = time.time() + 3600, 0
while time.time() < end:
    # Bursts with pauses, so the utilization moves and the comparison is not only "100 %".
    for _ in range(40):
        c = a @ b
    torch.cuda.synchronize()
    n += 1
    time.sleep(0.05 if n % 20 else 0.5)
PY
  pids+=($!)
  load_note="PyTorch fp16 8192x8192 matmul bursts on GPU $GPU"
  sleep 8 # CUDA context and first kernels
else
  log "PyTorch with CUDA not available: no load is generated (the idle figures are still compared)"
fi
log "load: $load_note"

# 3. nvidia-smi, sampled every 200 ms for the same window, beside the exporter.
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,memory.used,clocks.sm,temperature.gpu \
  --format=csv,noheader,nounits -lms 200 > "$OUT/nvidia-smi.csv" 2>&1 &
pids+=($!)
if [ ${#hfields[@]} -gt 0 ]; then
  nvidia-smi --query-gpu=index,"$(IFS=,; echo "${hfields[*]}")" --format=csv,noheader,nounits -lms 1000 \
    > "$OUT/nvidia-smi-health.csv" 2>&1 &
  pids+=($!)
fi

# 4. The exporter: real NVML, recorded, summarized, /metrics scraped near the end.
log "exporter: --source nvml --interval $INTERVAL --duration $DURATION"
timeout $((secs + 60)) "$BIN" exporter --source nvml --nvml.library "$lib" --interval "$INTERVAL" --duration "$DURATION" \
  --record "$OUT/device.capture" --summary "$OUT/exporter-summary.json" --kafka.flush-interval 1s \
  --web.listen-address "127.0.0.1:$PORT" >"$OUT/exporter.log" 2>&1 &
exp=$!
pids+=($exp)
sleep 3
if ! kill -0 "$exp" 2>/dev/null; then
  wait "$exp"
  die "the exporter exited at start with status $?: $(tail -5 "$OUT/exporter.log")"
fi
sleep $((secs - 6))
python3 - "$PORT" "$OUT/metrics.txt" 2>>"$OUT/check.log" <<'PY' || log "scraping /metrics failed (see check.log)"
import sys, time, urllib.request
t0 = time.time()
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read()
open(sys.argv[2], "wb").write(body)
print(f"[device-check] /metrics: {len(body)} bytes in {1000*(time.time()-t0):.1f} ms")
PY
wait "$exp"
rc=$?
cleanup
pids=()
[ $rc -eq 0 ] || die "the exporter exited with status $rc: $(tail -5 "$OUT/exporter.log")"

# 5. The capture replays to the same figures.
"$BIN" exporter --source replay --replay "$OUT/device.capture" --replay.fast --web.listen-address= \
  --summary "$OUT/replay-summary.json" >"$OUT/replay.log" 2>&1 || die "replaying the capture failed: $(tail -5 "$OUT/replay.log")"

# 6. Compare and summarize.
python3 "$here/compare.py" --gpu "$GPU" --load "$load_note" --out "$OUT" | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
