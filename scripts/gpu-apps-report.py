#!/usr/bin/env python3
"""Markdown summary of scripts/gpu-apps.sh's logs (issue 6: SD VAE decode; issue 7: Real-CUGAN).

usage: gpu-apps-report.py LOGDIR > apps.md

Reads LOGDIR/steps.tsv, machine.txt, vae-torch.jsonl, vae-ours-*.{out,err,smi},
sr-ours-*.{err,smi}, sr-ncnn-vulkan.{jsonl,err,smi}, compare.jsonl, vulkan.txt,
sr-whole-vs-auto.txt. Memory in GB = 1e9 bytes. Only the standard library.
"""
from __future__ import annotations

import json
import os
import re
import sys

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
# Issue 6's targets: (dtype, image side) -> (peak bytes, time ratio to PyTorch or None).
TARGETS = {("f16", 1024): (1.6e9, 1.5), ("f32", 2048): (12e9, None), ("f16", 2048): (6e9, None)}


def read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def jsonl(path: str) -> list[dict]:
    out = []
    for line in read(path).splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def to_bytes(value: str, unit: str) -> float:
    return float(value) * UNITS[unit]


def gb(b) -> str:
    return "–" if b is None else f"{b / 1e9:.2f}"


def ms(x) -> str:
    return "–" if x is None else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def smi_peak(logs: str, name: str):
    """nvidia-smi memory.used samples (MiB): peak minus the first sample (taken before
    the process started), in bytes; None without samples."""
    vals = [int(v) for v in re.findall(r"^\s*(\d+)\s*$", read(os.path.join(logs, f"{name}.smi")), re.M)]
    if len(vals) < 2:
        return None
    return (max(vals) - vals[0]) * 1024**2


def steps(logs: str) -> dict[str, tuple[int, str, str]]:
    out = {}
    for line in read(os.path.join(logs, "steps.tsv")).splitlines():
        f = line.split("\t")
        if len(f) == 4:
            out[f[0]] = (int(f[1]), f[2], f[3])
    return out


def why(logs: str, name: str, st: dict) -> str:
    if name not in st:
        return "not run"
    rc = st[name][0]
    if rc == 0:
        return ""
    if rc == 125:
        return "not started (deadline)"
    if rc in (124, 137):
        return f"timed out after {st[name][2]} s"
    err = [l for l in read(os.path.join(logs, f"{name}.err")).splitlines() if l.strip()]
    last = next((l for l in reversed(err) if "error" in l.lower() or "panicked" in l), err[-1] if err else "")
    return f"exit {rc}: {last.strip()[:300]}"


def ours_vae(logs: str, name: str) -> dict | None:
    out, err = read(os.path.join(logs, f"{name}.out")), read(os.path.join(logs, f"{name}.err"))
    r: dict = {"name": name}
    m = re.search(r"wrote .* in ([\d.]+) s \(load ([\d.]+) s, decode ([\d.]+) s[^)]*\); peak (device memory|RSS) ([\d.]+) (\w+)", out)
    if not m:
        return None
    r["total_s"], r["load_s"], r["decode_ms"] = float(m[1]), float(m[2]), float(m[3]) * 1e3
    r["peak_kind"] = "allocator" if m[4] == "device memory" else "RSS"
    r["peak"] = to_bytes(m[5], m[6])
    # The CLI prints the exact count after the rounded one since 2026-12-05; an older binary's
    # two-decimal GiB can read past a decimal-GB budget the allocator kept.
    exact = re.search(r"peak device memory [\d.]+ \w+ \((\d+) bytes", out)
    if exact:
        r["peak"] = int(exact[1])
    t = re.search(r"decode times: ([\d., ]+) ms", err)
    if t:
        r["times_ms"] = [float(v) for v in t[1].split(",")]
    b = re.search(r"; budget (.+)$", err, re.M)
    r["budget"] = b[1].strip() if b else "?"
    r["smi"] = smi_peak(logs, name)
    return r


SR_LINE = re.compile(
    r"^(?P<input>\S+) \((?P<w>\d+)x(?P<h>\d+).*?\) -> \S+ \((?P<ow>\d+)x(?P<oh>\d+)\).*?: (?P<variant>\S+), "
    # "1 tile of WxH" (whole image), "4x3 tile(s) of WxH" (--tile auto), "12 tile(s) of WxH" (older)
    r".*?(?:(?P<tr>\d+)x(?P<tc>\d+)|(?P<tiles>\d+)) tiles? ?(?:\(s\))? of (?P<tw>\d+)x(?P<th>\d+).*?, "
    r"(?P<total>[\d.]+) s \(upscale (?P<up>[\d.]+) s[^)]*\)"
    r"(?:, peak device memory (?P<peak>[\d.]+) (?P<unit>\w+))?", re.M)


def ours_sr(logs: str, name: str) -> dict | None:
    lines = list(SR_LINE.finditer(read(os.path.join(logs, f"{name}.err"))))
    if not lines:
        return None
    r = {"name": name, "images": len(lines), "tiles": int(lines[-1]["tiles"]) if lines[-1]["tiles"] else int(lines[-1]["tr"]) * int(lines[-1]["tc"]), "in": f"{lines[-1]['w']}x{lines[-1]['h']}",
         "tile": f"{lines[-1]['tw']}x{lines[-1]['th']}", "first_ms": float(lines[0]["up"]) * 1e3,
         "ms": float(lines[-1]["up"]) * 1e3, "out": f"{lines[-1]['ow']}x{lines[-1]['oh']}",
         "peak": to_bytes(lines[-1]["peak"], lines[-1]["unit"]) if lines[-1]["peak"] else None,
         "smi": smi_peak(logs, name)}
    return r


def main() -> None:
    logs = sys.argv[1]
    st = steps(logs)
    p = print
    p("# GPU tier: application figures (scripts/gpu-apps.sh)\n")
    p("```")
    p(read(os.path.join(logs, "machine.txt")).strip())
    p("```\n")

    # ---------------------------------------------------------------- issue 6
    p("## Issue 6: SD VAE decode, full-size SD decoder, seeded random weights\n")
    p("PyTorch: diffusers `AutoencoderKL.decode` + cuDNN (benchmark mode), median of the timed decodes "
      "(CUDA events) after warm-up, peak = `torch.cuda.max_memory_allocated` (reserved in the notes). "
      "Ours: `sd-vae-decode --device rocm --repeat N`, median of decodes 2..N (each ends with a device "
      "synchronize), peak = the allocator's peak as the CLI prints it (weights + activations + scratch, "
      "held or cached). nvidia-smi: the whole process (CUDA context, cuBLAS/cuDNN workspaces) over its "
      "idle baseline, sampled every 50 ms. GB = 1e9 bytes. f32 without TF32 on both sides.\n")
    recs = [r for r in jsonl(os.path.join(logs, "vae-torch.jsonl")) if r.get("impl") == "pytorch"]
    torch = {(r["dtype"], r["latent"]): r for r in recs}
    if recs:
        r = recs[0]
        p(f"PyTorch {r.get('torch')}, diffusers {r.get('diffusers')}, cuDNN {r.get('cudnn')}, {r.get('gpu')}.\n")
    sizes = dict(re.findall(r"(\w+)=(\d+)", read(os.path.join(logs, "sizes.txt"))))
    l1, l2 = int(sizes.get("lat_1k", 128)), int(sizes.get("lat_2k", 256))
    runs = [("f16", l1, "vae-ours-f16-1k"), ("f16", l2, "vae-ours-f16-2k"), ("f32", l2, "vae-ours-f32-2k"),
            ("f32", l1, "vae-ours-f32-1k")]
    p("| config | impl | dtype | time ms | peak memory GB | ratio to PyTorch (time / peak) | nvidia-smi GB | notes |")
    p("| --- | --- | --- | ---: | ---: | --- | ---: | --- |")
    verdicts = []
    for dtype, lat, name in runs:
        side = lat * 8
        cfg = f"{side}² ({lat}² latent)"
        t = torch.get((dtype, lat))
        if t and "error" not in t:
            p(f"| {cfg} | PyTorch + cuDNN | {dtype} | {ms(t['ms'])} | {gb(t.get('peak_allocated_bytes'))} | 1 | – | "
              f"reserved {gb(t.get('peak_reserved_bytes'))} GB; {t['reps']} reps, min {ms(t.get('ms_min'))} ms |")
        else:
            p(f"| {cfg} | PyTorch + cuDNN | {dtype} | – | – | – | – | "
              f"{(t or {}).get('error') or why(logs, 'vae-torch', st) or 'no record'} |")
        for variant in (name, f"{name}-nobudget"):
            if variant != name and variant not in st:
                continue
            o = ours_vae(logs, variant)
            if not o:
                p(f"| {cfg} | ours | {dtype} | – | – | – | – | {why(logs, variant, st) or 'no summary line'} |")
                continue
            ratio = "–"
            tr = pr = None
            if t and "error" not in t and t.get("peak_allocated_bytes"):
                tr, pr = o["decode_ms"] / t["ms"], o["peak"] / t["peak_allocated_bytes"]
                ratio = f"{tr:.2f}x / {pr:.2f}x"
            notes = [f"budget {o['budget']}"]
            if "times_ms" in o:
                notes.append(f"decodes {', '.join(f'{x:.0f}' for x in o['times_ms'])} ms")
            notes.append(f"load {o['load_s']:.2f} s")
            target = TARGETS.get((dtype, side))
            if target and o["peak_kind"] == "allocator":
                ok_peak = o["peak"] <= target[0]
                v = f"target peak ≤ {target[0] / 1e9:g} GB: {'met' if ok_peak else 'MISSED'}"
                if target[1] is not None:
                    v += f"; time ≤ {target[1]}x PyTorch: " + ("?" if tr is None else ("met" if tr <= target[1] else "MISSED"))
                notes.append(v)
                verdicts.append(f"{cfg} {dtype} ({variant}): {v}")
            p(f"| {cfg} | ours | {dtype} | {ms(o['decode_ms'])} | {gb(o['peak'])} ({o['peak_kind']}) | {ratio} | "
              f"{gb(o['smi'])} | {'; '.join(notes)} |")
    p("")
    for name in ("vae-ours-warmup-f16", "vae-ours-warmup-f32"):
        o = ours_vae(logs, name)
        if o:
            p(f"- {name}: 64² image, first decode in a fresh process {ms(o['decode_ms'])} ms, "
              f"whole process {st.get(name, (0, '?'))[1]} s (JIT with NVRTC when the kernel cache is cold).")
        elif name in st:
            p(f"- {name}: {why(logs, name, st)}")
    for v in verdicts:
        p(f"- **{v}**")
    cmp = jsonl(os.path.join(logs, "compare.jsonl"))
    vae_cmp = [c for c in cmp if not str(c.get("label", "")).startswith("sr-")]
    if vae_cmp:
        p("\nOur image against PyTorch's decode of the same latents (8-bit, round(clamp(x/2+0.5)·255)):\n")
        p("| ours | reference | max abs (levels) | max abs ([0,1]) | mean abs (levels) | values > 1 level | reference saturated |")
        p("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for c in vae_cmp:
            ref = os.path.basename(c.get("ref", "")).replace(".npy", "")
            if "error" in c:
                p(f"| {c['label']} | {ref} | {c['error']} | | | | |")
            else:
                p(f"| {c['label']} | {ref} | {c['max_abs_levels']} | {c['max_abs']:.4f} | {c['mean_abs_levels']:.3f} | "
                  f"{c['values_over_1_level']} of {c['values']} | {c['ref_saturated_fraction'] * 100:.1f}% |")

    # ---------------------------------------------------------------- issue 7
    p("\n## Issue 7: Real-CUGAN 2x (models-se/up2x-no-denoise), 1920x1080 → 3840x2160 on the H200\n")
    p("Ours: `realcugan --device rocm` on two copies of the image in one process; time = the second "
      "image's upscale (the first one's in the notes), peak = the allocator's peak over both. "
      "ncnn: Vulkan, realcugan-ncnn-vulkan's options (fp16 storage), whole image, median of the timed "
      "runs after one warm-up, upload and download included; ncnn reports no memory, so only nvidia-smi.\n")
    p("```")
    p(read(os.path.join(logs, "vulkan.txt")).strip() or "Vulkan: not reached")
    p("```\n")
    ncnn = next((r for r in jsonl(os.path.join(logs, "sr-ncnn-vulkan.jsonl")) if r.get("impl") == "ncnn-vulkan"), None)
    ncnn_ms = ncnn.get("ms") if ncnn and "error" not in ncnn else None
    p("| config | impl | dtype | tiles | time ms | peak memory GB | ratio to ncnn-vulkan (time) | nvidia-smi GB | notes |")
    p("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    if ncnn_ms is not None:
        p(f"| {ncnn.get('width')}x{ncnn.get('height')} 2x | ncnn-vulkan {ncnn.get('ncnn', '')} | fp16 storage | whole | {ms(ncnn_ms)} | – | 1 | "
          f"{gb(smi_peak(logs, 'sr-ncnn-vulkan'))} | {ncnn.get('vulkan_device', '')}; first run {ncnn.get('first_run_s')} s, "
          f"load {ncnn.get('load_s')} s, min {ms(ncnn.get('ms_min'))} ms |")
    else:
        reason = (ncnn or {}).get("error") or why(logs, "sr-ncnn-vulkan", st) or "no record"
        p(f"| 2x | ncnn-vulkan | – | – | – | – | – | – | did not run: {reason} |")
    for name, dtype, how in (("sr-ours-f32-whole", "f32", "whole, --vram-budget 24GiB"),
                             ("sr-ours-f16-whole", "f16", "whole, --vram-budget 24GiB"),
                             ("sr-ours-f32-auto", "f32", "--tile auto, default 2GiB budget"),
                             ("sr-ours-f16-auto", "f16", "--tile auto, default 2GiB budget")):
        o = ours_sr(logs, name)
        if not o:
            p(f"| 2x | ours | {dtype} | {how} | – | – | – | – | {why(logs, name, st) or 'no result line'} |")
            continue
        ratio = f"{o['ms'] / ncnn_ms:.2f}x" if ncnn_ms else "–"
        p(f"| {o['in']} 2x | ours | {dtype} | {o['tiles']} of {o['tile']} ({how}) | {ms(o['ms'])} | {gb(o['peak'])} | "
          f"{ratio} | {gb(o['smi'])} | first image {ms(o['first_ms'])} ms; whole process {st.get(name, (0, '?'))[1]} s |")
    sr_cmp = [c for c in cmp if str(c.get("label", "")).startswith("sr-")]
    if sr_cmp:
        p("\nOur output against ncnn-Vulkan's (8-bit; ncnn computes with fp16 storage, so a few levels are expected):\n")
        p("| ours | max abs (levels) | mean abs (levels) | values > 1 level |")
        p("| --- | ---: | ---: | ---: |")
        for c in sr_cmp:
            if "error" in c:
                p(f"| {c['label']} | {c['error']} | | |")
            else:
                p(f"| {c['label']} | {c['max_abs_levels']} | {c['mean_abs_levels']:.3f} | {c['values_over_1_level']} of {c['values']} |")
    for dt in ("f32", "f16"):
        same = read(os.path.join(logs, f"sr-whole-vs-auto-{dt}.txt")).strip()
        if same:
            p(f"\nOurs {dt} whole vs {dt} --tile auto: {same} PNG files (tiling is lossless).")

    # ---------------------------------------------------------------- steps
    p("\n## Steps\n")
    p("| step | exit | seconds | limit |")
    p("| --- | ---: | ---: | ---: |")
    for name, (rc, secs, lim) in st.items():
        p(f"| {name} | {rc} | {secs} | {lim} |")
    failed = [n for n, (rc, _, _) in st.items() if rc != 0]
    if failed:
        p("\nFailed or skipped steps (last lines of stderr):\n")
        for n in failed:
            p(f"- {n}: {why(logs, n, st)}")


if __name__ == "__main__":
    main()
