#!/usr/bin/env python3
"""Compares the exporter's device-check figures with nvidia-smi's and prints the summary.

Inputs in --out: exporter-summary.json and replay-summary.json (slicemeter exporter --summary),
nvidia-smi.csv (nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,memory.used,
clocks.sm,temperature.gpu -lms 200), metrics.txt (a /metrics scrape near the end), and for the
GPU health: nvidia-smi-health.fields (the health fields this nvidia-smi can query, one a line) and
nvidia-smi-health.csv (index then those fields, -lms 1000), nvidia-smi-pci.csv (index, pci.bus_id).
Exit status 1 if a check fails.
"""
import argparse, csv, json, os, re, sys

# Tolerances: both tools read the same driver, but over slightly different windows and, for
# memory, NVML's v1 "used" includes the driver's reserved framebuffer that nvidia-smi leaves out.
UTIL_PTS = 10.0
POWER_REL = 0.15
MEM_MIB = 768.0
CLOCK_REL = 0.10
TEMP_C = 5.0       # memory temperature
RESERVED_MIB = 128.0

NA = ("", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]")

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

def smi_health(out, gpu):
    """The health columns nvidia-smi reported for gpu: field -> list of raw values (N/A left out)."""
    fpath, cpath = os.path.join(out, "nvidia-smi-health.fields"), os.path.join(out, "nvidia-smi-health.csv")
    if not (os.path.exists(fpath) and os.path.exists(cpath)):
        return None
    fields = [f.strip().replace("clocks_throttle_reasons.", "clocks_event_reasons.") for f in open(fpath) if f.strip()]
    cols = {f: [] for f in fields}
    with open(cpath) as f:
        for r in csv.reader(f):
            if len(r) != len(fields) + 1 or r[0].strip() != str(gpu):
                continue
            for name, v in zip(fields, r[1:]):
                v = v.strip()
                if v.lower() not in NA:
                    cols[name].append(v)
    return cols

def num(vals):
    out = []
    for v in vals:
        try:
            out.append(float(v))
        except ValueError:
            pass
    return out

def yes(v):
    return v.strip().lower() in ("yes", "1", "active", "true")

def compare_health(check, info, h, cols, ticks, loaded):
    """Compares the exporter's health figures (summary) with nvidia-smi's where both report them."""
    sup = set(h.get("supported") or [])
    info(f"health fields read: {', '.join(sorted(sup)) or 'none'}; driver {h.get('driver_version')} CUDA {h.get('cuda_version')}")
    if cols is None:
        info("nvidia-smi health columns missing (nvidia-smi-health.csv): health not compared")
        return
    missing = [f for f, v in cols.items() if not v]
    if missing:
        info(f"nvidia-smi reports nothing (N/A) for: {', '.join(missing)}")

    def both(field, key, what):
        """nvidia-smi's values of field if it and the exporter report it; a check that they agree on support."""
        vals = cols.get(field)
        if vals is None:
            info(f"{what}: this nvidia-smi cannot query {field}")
            return None
        if not vals:
            if key in sup:
                info(f"{what}: the exporter reads it, nvidia-smi reports N/A")
            return None
        if key not in sup:
            check(f"{what} read", False, f"nvidia-smi reports {field} ({vals[0]}), the exporter does not read it")
            return None
        return vals

    v = both("driver_version", "versions", "driver version")
    if v:
        check("driver version vs nvidia-smi", v[0] == h["driver_version"], f"exporter {h['driver_version']!r} vs nvidia-smi {v[0]!r}")
    v = both("temperature.memory", "memory_temperature", "memory temperature")
    if v:
        m = mean(num(v))
        check("memory temperature vs nvidia-smi", abs(h["memory_temperature_mean_celsius"] - m) <= TEMP_C,
              f"exporter {h['memory_temperature_mean_celsius']:.1f} C vs nvidia-smi {m:.1f} C")
    v = both("memory.free", "fb", "FB free")
    if v:
        m = mean(num(v))
        check("FB free vs nvidia-smi", abs(h["fb_free_mean_bytes"] / 2**20 - m) <= MEM_MIB,
              f"exporter {h['fb_free_mean_bytes'] / 2**20:.0f} MiB vs nvidia-smi {m:.0f} MiB")
    v = both("memory.reserved", "fb", "FB reserved")
    if v:
        m = mean(num(v))
        check("FB reserved vs nvidia-smi", abs(h["fb_reserved_bytes"] / 2**20 - m) <= RESERVED_MIB,
              f"exporter {h['fb_reserved_bytes'] / 2**20:.0f} MiB vs nvidia-smi {m:.0f} MiB")
    for field, key, ours, what in (("utilization.memory", "copy_utilization", "copy_utilization_mean", "copy (memory) utilization"),
                                   ("utilization.encoder", "codec_utilization", "encoder_utilization_mean", "encoder utilization"),
                                   ("utilization.decoder", "codec_utilization", "decoder_utilization_mean", "decoder utilization")):
        v = both(field, key, what)
        if v:
            m = mean(num(v))
            check(f"{what} vs nvidia-smi", abs(100 * h[ours] - m) <= UTIL_PTS, f"exporter {100 * h[ours]:.1f} % vs nvidia-smi {m:.1f} %")
    for field, ours in (("remapped_rows.correctable", "remapped_rows_correctable"), ("remapped_rows.uncorrectable", "remapped_rows_uncorrectable")):
        v = both(field, "row_remapping", field)
        if v and num(v):
            check(f"{field} vs nvidia-smi", int(num(v)[-1]) == h[ours], f"exporter {h[ours]} vs nvidia-smi {v[-1]}")
    for field, ours in (("remapped_rows.pending", "remap_pending"), ("remapped_rows.failure", "remap_failure")):
        v = both(field, "row_remapping", field)
        if v:
            check(f"{field} vs nvidia-smi", yes(v[-1]) == h[ours], f"exporter {h[ours]} vs nvidia-smi {v[-1]}")
    # Clocks-event reasons change within a second: their shares are shown, not compared.
    ev = h.get("clocks_event_ticks") or {}
    for field, vals in cols.items():
        if field.startswith("clocks_event_reasons.") and field != "clocks_event_reasons.active" and vals:
            name = field.split(".", 1)[1]
            share = 100 * sum(yes(x) for x in vals) / len(vals)
            info(f"clocks-event reason {name}: active in {share:.0f} % of nvidia-smi rows, {100 * ev.get(name, 0) / max(ticks, 1):.0f} % of exporter ticks")
    link = [f"{f.split('.')[-2]} {cols[f][0]}" for f in ("pcie.link.gen.current", "pcie.link.width.current") if cols.get(f)]
    if link:
        info(f"PCIe link (nvidia-smi): {', '.join(link)}")
    if "pcie" in sup and loaded:
        check("PCIe counters grow under load", h["pcie_tx_bytes"] + h["pcie_rx_bytes"] > 0,
              f"TX {h['pcie_tx_bytes']} B, RX {h['pcie_rx_bytes']} B over the run")
    info(f"NVLink TX/RX over the run: {h['nvlink_tx_bytes']}/{h['nvlink_rx_bytes']} B ({'read' if 'nvlink' in sup else 'not reported'}); "
         f"PCIe replays {h['pcie_replays']}; violation time power {h['power_violation_ns'] / 1e9:.2f} s, thermal {h['thermal_violation_ns'] / 1e9:.2f} s")

def smi_pci(out, gpu):
    """nvidia-smi's PCI bus id of gpu, or None."""
    path = os.path.join(out, "nvidia-smi-pci.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) == 2 and r[0].strip() == str(gpu):
                return r[1].strip()
    return None

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
        bus = smi_pci(a.out, a.gpu)
        if bus is None:
            print("PCI bus id: nvidia-smi-pci.csv missing, not compared")
        else:
            check("PCI bus id vs nvidia-smi", g.get("pci_bus_id") == bus, f"exporter {g.get('pci_bus_id')!r} vs nvidia-smi {bus!r}")
        if "health" in g:
            compare_health(check, lambda line: print(line), g["health"], smi_health(a.out, a.gpu), g["ticks"], a.load not in ("", "none"))
        else:
            check("GPU health in the summary", False, "exporter-summary.json has no health (an older binary?)")
    for i in live["instances"]:
        print(f"instance {i['id']} kind={i['kind']} profile={i['profile'] if 'profile' in i else ''} sm_active mean={i['sm_active_mean']:.3f} max={i['sm_active_max']:.3f} attached {i['attached_samples']}/{i['samples']}")
    same = [(k, live["gpus"][j][k], replay["gpus"][j][k]) for j in range(min(len(live["gpus"]), len(replay["gpus"])))
            for k in ("utilization_mean", "power_mean_watts", "memory_used_mean_bytes", "energy_joules", "health", "pci_bus_id")
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
