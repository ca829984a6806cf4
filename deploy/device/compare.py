#!/usr/bin/env python3
"""Compares the exporter's device-check figures with nvidia-smi's and prints the summary.

Inputs in --out: exporter-summary.json and replay-summary.json (slicemeter exporter --summary),
nvidia-smi.csv (nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,memory.used,
clocks.sm,temperature.gpu -lms 200), metrics.txt (a /metrics scrape near the end).
Exit status 1 if a check fails.
"""
import argparse, csv, json, os, re, sys

# Tolerances: both tools read the same driver, but over slightly different windows and, for
# memory, NVML's v1 "used" includes the driver's reserved framebuffer that nvidia-smi leaves out.
UTIL_PTS = 10.0
POWER_REL = 0.15
MEM_MIB = 768.0
CLOCK_REL = 0.10

def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")

def smi(path, gpu):
    rows = {"util": [], "power": [], "mem": [], "clock": [], "temp": []}
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) < 7 or r[1].strip() != str(gpu):
                continue
            try:
                vals = [float(x) for x in r[2:7]]
            except ValueError:
                continue  # [N/A]
            for k, v in zip(rows, vals):
                rows[k].append(v)
    return {k: mean(v) for k, v in rows.items()}, len(rows["util"])

def metric(text, name):
    total = 0.0
    found = False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--load", default="")
    a = ap.parse_args()
    live = json.load(open(os.path.join(a.out, "exporter-summary.json")))
    replay = json.load(open(os.path.join(a.out, "replay-summary.json")))
    s, n_smi = smi(os.path.join(a.out, "nvidia-smi.csv"), a.gpu)
    metrics = open(os.path.join(a.out, "metrics.txt")).read() if os.path.exists(os.path.join(a.out, "metrics.txt")) else ""
    gpus = [g for g in live["gpus"] if g["index"] == a.gpu]
    checks = []

    def check(name, ok, detail):
        checks.append((name, ok, detail))

    print(f"slicemeter device check: {live['ticks']} ticks, {live['samples']} samples, {live['first_tick']} .. {live['last_tick']}")
    print(f"load: {a.load}")
    check("exporter sampled", live["ticks"] > 0 and live["samples"] > 0, f"{live['ticks']} ticks")
    if not gpus:
        check(f"GPU {a.gpu} present", False, "not in the exporter's summary")
    else:
        g = gpus[0]
        print(f"GPU {a.gpu}: {g['model']} {g['uuid']} gpm={g['gpm']} driver utilization samples={g['driver_utilization_samples']}")
        check("GPU read every tick", g["failed_ticks"] == 0, f"{g['failed_ticks']} failed ticks")
        check("driver-buffered samples read (GetSamples)", g["driver_utilization_samples"] >= g["ticks"] // 10,
              f"{g['driver_utilization_samples']} samples over {g['ticks']} ticks")
        util = 100 * g["utilization_mean"]
        check("utilization vs nvidia-smi", abs(util - s["util"]) <= UTIL_PTS, f"exporter {util:.1f} % vs nvidia-smi {s['util']:.1f} % ({n_smi} rows)")
        check("power vs nvidia-smi", abs(g["power_mean_watts"] - s["power"]) <= POWER_REL * max(s["power"], 1),
              f"exporter {g['power_mean_watts']:.1f} W vs nvidia-smi {s['power']:.1f} W")
        mem = g["memory_used_mean_bytes"] / 2**20
        check("memory used vs nvidia-smi", abs(mem - s["mem"]) <= MEM_MIB, f"exporter {mem:.0f} MiB vs nvidia-smi {s['mem']:.0f} MiB")
        clk = g["sm_clock_mean_hertz"] / 1e6
        check("SM clock vs nvidia-smi", abs(clk - s["clock"]) <= CLOCK_REL * max(s["clock"], 1), f"exporter {clk:.0f} MHz vs nvidia-smi {s['clock']:.0f} MHz")
        check("energy counter grows", g["energy_joules"] > 0, f"{g['energy_joules']:.1f} J")
        print(f"temperature: exporter {g['temperature_mean_celsius']:.1f} C vs nvidia-smi {s['temp']:.1f} C; XIDs {g['xids']}")
    for i in live["instances"]:
        print(f"instance {i['id']} kind={i['kind']} profile={i['profile'] if 'profile' in i else ''} sm_active mean={i['sm_active_mean']:.3f} max={i['sm_active_max']:.3f} attached {i['attached_samples']}/{i['samples']}")
    same = [(k, live["gpus"][j][k], replay["gpus"][j][k]) for j in range(min(len(live["gpus"]), len(replay["gpus"])))
            for k in ("utilization_mean", "power_mean_watts", "memory_used_mean_bytes", "energy_joules")
            if live["gpus"][j][k] != replay["gpus"][j][k]]
    check("capture replays to the same figures", replay["ticks"] == live["ticks"] and not same and len(replay["gpus"]) == len(live["gpus"]),
          f"replay {replay['ticks']} ticks; differences {same[:3]}")
    if metrics:
        ticks = metric(metrics, "slicemeter_exporter_ticks_total")
        calls = metric(metrics, "slicemeter_exporter_nvml_calls_total")
        errs = metric(metrics, "slicemeter_exporter_nvml_errors_total") or 0
        count = metric(metrics, "slicemeter_exporter_sampling_jitter_seconds_count")
        late = 0.0
        for line in metrics.splitlines():
            m = re.match(r'slicemeter_exporter_sampling_jitter_seconds_bucket\{le="0.01"\} (\S+)', line)
            if m and count:
                late = 1 - float(m.group(1)) / count
        if ticks:
            print(f"NVML calls per tick: {calls / ticks:.1f} (calls {calls:.0f}, ticks {ticks:.0f}); NVML errors {errs:.0f}; ticks later than 10 ms: {100 * late:.1f} %")
    failed = [c for c in checks if not c[1]]
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    print("RESULT:", "PASS" if not failed else f"FAIL ({len(failed)} of {len(checks)} checks)")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
