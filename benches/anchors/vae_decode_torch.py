#!/usr/bin/env python3
"""PyTorch anchor for the SD VAE decode on the GPU (issue 6): diffusers' `AutoencoderKL.decode`.

Reference: diffusers (0.42.1 in the GPU-tier runs; the version the examples-sd fixtures were
made with) `AutoencoderKL(**config).decode(latents / scaling_factor).sample` on PyTorch + cuDNN,
with the full-size SD decoder configuration of examples-sd/fixtures/full_config_shapes.json
(`models.sd.config`: block_out_channels [128, 256, 512, 512], 4 latent channels, 32 groups),
or any diffusers config.json (`--config`, e.g. examples-sd/fixtures/sd_config.json for a tiny
run on the CPU).

Subcommands (all print JSON lines on stdout, progress on stderr):

  make    (numpy and safetensors only: no torch, no diffusers) seeded random decoder weights
          (diffusers key layout: `post_quant_conv.*`, `decoder.*`, checked against
          diffusers' own model by `bench`; f32 safetensors) and seeded latents (float32 .npy, [1, C, h, w], as a
          diffusion model emits them: the decode divides by scaling_factor), one file per
          latent size. The weights have the statistics of examples-sd/benches/decode_cpu.rs
          (conv/linear weights U(±sqrt(3/fan_in)), biases U(±0.1), norm scales U(0.6, 1.4))
          so that activations stay in range in f16. Only the decoder is written and put on
          the GPU: the encoder plays no part in a decode.
  bench   for each --configs entry DTYPE:LATENT (e.g. f16:128 = 1024² image), on --device
          (cuda by default): the decoder (post_quant_conv + decoder only) in that dtype,
          --warmup decodes, then --reps decodes each timed with CUDA events, median reported;
          torch.cuda.max_memory_allocated / max_memory_reserved over the timed decodes
          (peaks reset after warm-up; they include the weights and the latents, as the
          allocator peak of sd-vae-decode does). f32 runs with TF32 off (cuDNN and matmul);
          cuDNN benchmark mode on, as benches/anchors/cudnn_conv.py (--no-cudnn-benchmark
          for PyTorch's default). --save-images DIR writes each config's last image as uint8
          HWC .npy (diffusers' VaeImageProcessor: round(clamp(x/2 + 0.5, 0, 1) * 255)).
  all     make, then bench, in one process.
  compare our PNG against one or more reference .npy images: max / mean absolute
          difference in 8-bit levels and in [0, 1] units, and how many values differ by
          more than one level (a rounding flip).

On the GPU machine (scripts/gpu-apps.sh runs it; diffusers is carried as a wheel):
  python3 benches/anchors/vae_decode_torch.py all --dir /tmp/vae --latents 8,128,256 \\
      --configs f16:128,f32:128,f16:256,f32:256 --save-images /tmp/vae/ref
On the CPU with a tiny model (a check of the script itself):
  python benches/anchors/vae_decode_torch.py all --config examples-sd/fixtures/sd_config.json \\
      --device cpu --dir /tmp/vae --latents 8 --configs f32:8 --reps 2 --warmup 1
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FULL_SHAPES = os.path.join(REPO, "examples-sd", "fixtures", "full_config_shapes.json")
SEED = 20261202
DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def log(msg: str) -> None:
    print(f"vae_decode_torch: {msg}", file=sys.stderr, flush=True)


def emit(rec: dict) -> None:
    print(json.dumps(rec), flush=True)


def load_config(path: str | None) -> dict:
    if path:
        with open(path) as f:
            cfg = json.load(f)
    else:
        with open(FULL_SHAPES) as f:
            cfg = json.load(f)["models"]["sd"]["config"]
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


def build_vae(cfg: dict):
    from diffusers import AutoencoderKL

    return AutoencoderKL(**cfg)


class _Shapes:
    """A diffusers state_dict's names and shapes, in the order they are added."""

    def __init__(self):
        self.out: list[tuple[str, tuple[int, ...]]] = []

    def conv(self, name, cout, cin, k):
        self.out.extend([(f"{name}.weight", (cout, cin, k, k)), (f"{name}.bias", (cout,))])

    def norm(self, name, c):
        self.out.extend([(f"{name}.weight", (c,)), (f"{name}.bias", (c,))])

    def resnet(self, name, cin, cout):
        self.norm(f"{name}.norm1", cin)
        self.conv(f"{name}.conv1", cout, cin, 3)
        self.norm(f"{name}.norm2", cout)
        self.conv(f"{name}.conv2", cout, cout, 3)
        if cin != cout:
            self.conv(f"{name}.conv_shortcut", cout, cin, 1)

    def attention(self, name, c):
        self.norm(f"{name}.group_norm", c)
        for lin in ("to_q", "to_k", "to_v", "to_out.0"):
            self.out.extend([(f"{name}.{lin}.weight", (c, c)), (f"{name}.{lin}.bias", (c,))])


def decoder_shapes(cfg: dict) -> list[tuple[str, tuple[int, ...]]]:
    """The diffusers names and shapes of post_quant_conv + decoder (AutoencoderKL with
    UpDecoderBlock2D up blocks), in a fixed order; checked against diffusers' own
    state_dict by `bench` (and by the CPU check in the docstring)."""
    lat, ch = cfg["latent_channels"], list(cfg["block_out_channels"])
    s = _Shapes()
    conv, norm, resnet, attention = s.conv, s.norm, s.resnet, s.attention

    if cfg.get("use_post_quant_conv", True):
        conv("post_quant_conv", lat, lat, 1)
    top = ch[-1]
    conv("decoder.conv_in", top, lat, 3)
    resnet("decoder.mid_block.resnets.0", top, top)
    if cfg.get("mid_block_add_attention", True):
        attention("decoder.mid_block.attentions.0", top)
    resnet("decoder.mid_block.resnets.1", top, top)
    rev = ch[::-1]
    prev = rev[0]
    for i, c in enumerate(rev):
        for j in range(cfg.get("layers_per_block", 2) + 1):
            resnet(f"decoder.up_blocks.{i}.resnets.{j}", prev if j == 0 else c, c)
        if i < len(rev) - 1:
            conv(f"decoder.up_blocks.{i}.upsamplers.0.conv", c, c, 3)
        prev = c
    norm("decoder.conv_norm_out", rev[-1])
    conv("decoder.conv_out", cfg.get("out_channels", 3), rev[-1], 3)
    return s.out


def encoder_shapes(cfg: dict) -> list[tuple[str, tuple[int, ...]]]:
    """The diffusers names and shapes of the encoder (DownEncoderBlock2D down blocks) +
    quant_conv, in a fixed order (for sd-vae-encode's large-image runs; the PyTorch bench
    does not use them)."""
    lat, ch = cfg["latent_channels"], list(cfg["block_out_channels"])
    s = _Shapes()
    conv, norm, resnet, attention = s.conv, s.norm, s.resnet, s.attention

    conv("encoder.conv_in", ch[0], cfg.get("in_channels", 3), 3)
    prev = ch[0]
    for i, c in enumerate(ch):
        for j in range(cfg.get("layers_per_block", 2)):
            resnet(f"encoder.down_blocks.{i}.resnets.{j}", prev if j == 0 else c, c)
        if i < len(ch) - 1:
            conv(f"encoder.down_blocks.{i}.downsamplers.0.conv", c, c, 3)
        prev = c
    top = ch[-1]
    resnet("encoder.mid_block.resnets.0", top, top)
    if cfg.get("mid_block_add_attention", True):
        attention("encoder.mid_block.attentions.0", top)
    resnet("encoder.mid_block.resnets.1", top, top)
    norm("encoder.conv_norm_out", top)
    conv("encoder.conv_out", 2 * lat, top, 3)
    if cfg.get("use_quant_conv", True):
        conv("quant_conv", 2 * lat, 2 * lat, 1)
    return s.out


def random_decoder(cfg: dict, seed: int, shapes=decoder_shapes) -> dict[str, np.ndarray]:
    """Seeded random post_quant_conv + decoder parameters (float32 numpy); with
    `shapes=encoder_shapes`, the encoder's."""
    rng = np.random.default_rng(seed)
    state = {}
    for name, shape in shapes(cfg):
        u = rng.random(shape, dtype=np.float32)
        if name.endswith(".bias"):
            t = (u * 2 - 1) * np.float32(0.1)
        elif "norm" in name:
            t = np.float32(0.6) + u * np.float32(0.8)
        else:
            fan_in = int(np.prod(shape[1:]))
            t = (u * 2 - 1) * np.float32((3.0 / fan_in) ** 0.5)
        state[name] = np.ascontiguousarray(t, dtype=np.float32)
    return state


def cmd_make(args, cfg: dict) -> None:
    """Needs only numpy and safetensors (no torch, no diffusers)."""
    from safetensors.numpy import save_file

    os.makedirs(args.dir, exist_ok=True)
    t = time.perf_counter()
    state = random_decoder(cfg, args.seed)
    wpath = os.path.join(args.dir, "sd_vae_random.safetensors")
    save_file(state, wpath, metadata={"format": "pt"})
    nparams = int(sum(v.size for v in state.values()))
    if args.encoder:
        epath = os.path.join(args.dir, "sd_encoder_random.safetensors")
        save_file(random_decoder(cfg, args.seed + 2, encoder_shapes), epath, metadata={"format": "pt"})
        log(f"wrote {epath}")
    log(f"wrote {wpath}: {len(state)} tensors, {nparams} parameters ({time.perf_counter() - t:.1f} s)")
    rng = np.random.default_rng(args.seed + 1)
    lat_paths = {}
    for n in args.latents:
        lat = rng.standard_normal((1, cfg["latent_channels"], n, n), dtype=np.float32)
        p = os.path.join(args.dir, f"latent_{n}.npy")
        np.save(p, lat)
        lat_paths[n] = p
    emit({"step": "make", "weights": wpath, "tensors": len(state), "parameters": nparams,
          "latents": {str(k): v for k, v in lat_paths.items()}, "seed": args.seed, "config": cfg})


def to_uint8(sample) -> np.ndarray:
    import torch

    x = ((sample.float() / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8)
    return x[0].permute(1, 2, 0).contiguous().cpu().numpy()


def load_reference(args, cfg: dict):
    """diffusers' AutoencoderKL with the decoder weights of `make` (every decoder key
    present, with its shape, and nothing else)."""
    from safetensors.torch import load_file

    vae = build_vae(cfg)
    state = load_file(os.path.join(args.dir, "sd_vae_random.safetensors"))
    expected = {k: tuple(v.shape) for k, v in vae.state_dict().items()
                if k.startswith("decoder.") or k.startswith("post_quant_conv.")}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if got != expected:
        raise SystemExit(f"weights do not match diffusers' decoder: missing {sorted(set(expected) - set(got))[:5]}, "
                         f"extra {sorted(set(got) - set(expected))[:5]}, "
                         f"shape differences {[k for k in got if k in expected and got[k] != expected[k]][:5]}")
    vae.load_state_dict(state, strict=False)
    return vae


def cmd_bench(args, cfg: dict):
    import torch

    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    vae = load_reference(args, cfg)
    vae.eval()
    # Only the decoder path goes to the device.
    vae.encoder = None
    vae.quant_conv = None
    import diffusers

    env = {"torch": torch.__version__, "diffusers": diffusers.__version__,
           "cudnn": torch.backends.cudnn.version() if cuda else None,
           "gpu": torch.cuda.get_device_name(dev) if cuda else "cpu",
           "cudnn_benchmark": torch.backends.cudnn.benchmark, "tf32": False}
    log(f"{env}")
    if args.save_images:
        os.makedirs(args.save_images, exist_ok=True)
    sf = cfg.get("scaling_factor", 0.18215)
    shift = cfg.get("shift_factor") or 0.0
    for spec in args.configs:
        dt_name, lat_n = spec.split(":")
        lat_n = int(lat_n)
        rec = {"impl": "pytorch", "model": "sd-vae", "dtype": dt_name, "latent": lat_n,
               "image": lat_n * 8, "reps": args.reps, "warmup": args.warmup, **env}
        try:
            dtype = getattr(torch, DTYPES[dt_name])
            if cuda:
                torch.cuda.empty_cache()
            model = copy.deepcopy(vae).to(dev, dtype)
            lat = np.load(os.path.join(args.dir, f"latent_{lat_n}.npy"))
            z = (torch.from_numpy(lat).to(dev, dtype) / sf) + shift
            if cuda:
                torch.cuda.synchronize()
                rec["weights_and_latents_bytes"] = torch.cuda.memory_allocated(dev)
            with torch.inference_mode():
                for _ in range(args.warmup):
                    model.decode(z).sample
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats(dev)
                times = []
                for _ in range(args.reps):
                    if cuda:
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        out = model.decode(z).sample
                        e.record()
                        e.synchronize()
                        times.append(s.elapsed_time(e))
                    else:
                        t = time.perf_counter()
                        out = model.decode(z).sample
                        times.append((time.perf_counter() - t) * 1e3)
                    last = out
                    del out
                if cuda:
                    torch.cuda.synchronize()
                    rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
                    rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
            rec["times_ms"] = [round(t, 3) for t in times]
            rec["ms"] = round(statistics.median(times), 3)
            rec["ms_min"] = round(min(times), 3)
            if args.save_images:
                p = os.path.join(args.save_images, f"torch_{dt_name}_{lat_n}.npy")
                np.save(p, to_uint8(last))
                rec["image_npy"] = p
            del last, model, z
        except Exception as e:  # one failed config must not stop the others
            rec["error"] = f"{type(e).__name__}: {e}"
            if cuda:
                torch.cuda.empty_cache()
        log(f"{spec}: {rec.get('ms')} ms, peak {rec.get('peak_allocated_bytes')} B{'; ' + rec['error'] if 'error' in rec else ''}")
        emit(rec)


def cmd_compare(args):
    from PIL import Image

    ours = np.asarray(Image.open(args.ours).convert("RGB"), dtype=np.int16)
    for ref_path in args.ref:
        rec = {"step": "compare", "ours": args.ours, "ref": ref_path, "label": args.label}
        try:
            # A reference .npy (PyTorch's decode) or another PNG of ours (banded vs whole).
            if ref_path.endswith(".png"):
                ref = np.asarray(Image.open(ref_path).convert("RGB"), dtype=np.int16)
            else:
                ref = np.load(ref_path).astype(np.int16)
            if ref.shape != ours.shape:
                raise ValueError(f"shapes differ: ours {ours.shape}, reference {ref.shape}")
            d = np.abs(ours - ref)
            rec.update({
                "max_abs_levels": int(d.max()),
                "max_abs": round(float(d.max()) / 255, 6),
                "mean_abs_levels": round(float(d.mean()), 5),
                "values_over_1_level": int((d > 1).sum()),
                "values": int(d.size),
                # A mostly saturated reference would make the comparison weak: say so.
                "ref_saturated_fraction": round(float(((ref == 0) | (ref == 255)).mean()), 4),
                "ref_std_levels": round(float(ref.std()), 2),
            })
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"
        emit(rec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--dir", required=True, help="weights and latents folder")
        p.add_argument("--config", help="diffusers AutoencoderKL config.json (default: the full-size SD one)")
        p.add_argument("--seed", type=int, default=SEED)

    def make_args(p):
        p.add_argument("--latents", default="8,128,256", type=lambda s: [int(x) for x in s.split(",")],
                       help="latent sides to write (image side = 8x)")
        p.add_argument("--encoder", action="store_true",
                       help="also write seeded random encoder weights (sd_encoder_random.safetensors)")

    def bench_args(p):
        p.add_argument("--configs", default="f16:128,f32:128,f16:256,f32:256", type=lambda s: s.split(","),
                       help="DTYPE:LATENT,... with DTYPE f16, bf16 or f32")
        p.add_argument("--device", default="cuda")
        p.add_argument("--reps", type=int, default=5)
        p.add_argument("--warmup", type=int, default=2)
        p.add_argument("--no-cudnn-benchmark", action="store_true")
        p.add_argument("--save-images", help="folder for each config's uint8 image (.npy)")

    p = sub.add_parser("make")
    common(p)
    make_args(p)
    p = sub.add_parser("bench")
    common(p)
    bench_args(p)
    p = sub.add_parser("all")
    common(p)
    make_args(p)
    bench_args(p)
    p = sub.add_parser("compare")
    p.add_argument("--ours", required=True, help="our PNG")
    p.add_argument("--ref", required=True, action="append",
                   help="reference uint8 HWC .npy, or a PNG (repeatable)")
    p.add_argument("--label", default="")
    args = ap.parse_args()

    if args.cmd == "compare":
        return cmd_compare(args)
    cfg = load_config(args.config)
    if args.cmd == "make":
        cmd_make(args, cfg)
    elif args.cmd == "bench":
        cmd_bench(args, cfg)
    else:
        cmd_make(args, cfg)
        cmd_bench(args, cfg)


if __name__ == "__main__":
    main()
