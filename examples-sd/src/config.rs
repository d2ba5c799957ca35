//! The decoder's configuration: presets for the published VAEs, or a diffusers
//! `config.json`.

use crate::error::{Result, SdError};
use serde_json::Value;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// diffusers' `Decoder` uses this eps for every GroupNorm (resnets, the mid-block
/// attention's norm and `conv_norm_out`); it is not a config field.
pub const NORM_EPS: f64 = 1e-6;

/// An `AutoencoderKL` decoder: `UpDecoderBlock2D` blocks, SiLU, one-head mid-block
/// attention, plus how latents are un-scaled before decoding.
#[derive(Clone, Debug, PartialEq)]
pub struct VaeConfig {
    pub latent_channels: usize,
    /// Image channels the encoder takes (3).
    pub in_channels: usize,
    pub out_channels: usize,
    /// Encoder order (lowest first); the decoder runs them reversed.
    pub block_out_channels: Vec<usize>,
    /// Each decoder up block has `layers_per_block + 1` resnets.
    pub layers_per_block: usize,
    pub norm_num_groups: usize,
    /// The encoder's 1x1 conv after conv_out (SD 1.x/2.x, SDXL; not SD3/FLUX).
    pub use_quant_conv: bool,
    pub use_post_quant_conv: bool,
    pub mid_block_add_attention: bool,
    pub scaling_factor: f64,
    pub shift_factor: Option<f64>,
    /// Per-channel latent statistics some models (e.g. Playground v2.5) use instead of a
    /// shift: `z = latents · std / scaling + mean`.
    pub latents_mean: Option<Vec<f64>>,
    pub latents_std: Option<Vec<f64>>,
}

/// The published VAEs this crate has presets for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// SD 1.x / 2.x.
    Sd,
    Sdxl,
    Sd3,
    Flux,
}

impl Model {
    pub const ALL: [Model; 4] = [Model::Sd, Model::Sdxl, Model::Sd3, Model::Flux];

    pub fn name(self) -> &'static str {
        match self {
            Model::Sd => "sd",
            Model::Sdxl => "sdxl",
            Model::Sd3 => "sd3",
            Model::Flux => "flux",
        }
    }

    /// The published configuration (the models' `vae/config.json`).
    pub fn config(self) -> VaeConfig {
        let base = VaeConfig {
            latent_channels: 4,
            in_channels: 3,
            out_channels: 3,
            block_out_channels: vec![128, 256, 512, 512],
            layers_per_block: 2,
            norm_num_groups: 32,
            use_quant_conv: true,
            use_post_quant_conv: true,
            mid_block_add_attention: true,
            scaling_factor: 0.18215,
            shift_factor: None,
            latents_mean: None,
            latents_std: None,
        };
        match self {
            Model::Sd => base,
            Model::Sdxl => VaeConfig { scaling_factor: 0.13025, ..base },
            // SD3 and FLUX VAEs have neither quant_conv nor post_quant_conv.
            Model::Sd3 => VaeConfig {
                latent_channels: 16,
                use_quant_conv: false,
                use_post_quant_conv: false,
                scaling_factor: 1.5305,
                shift_factor: Some(0.0609),
                ..base
            },
            Model::Flux => VaeConfig {
                latent_channels: 16,
                use_quant_conv: false,
                use_post_quant_conv: false,
                scaling_factor: 0.3611,
                shift_factor: Some(0.1159),
                ..base
            },
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Model {
    type Err = SdError;

    fn from_str(s: &str) -> Result<Model> {
        let s = s.trim().to_ascii_lowercase();
        Model::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            SdError::Config(format!("unknown model {s:?}: expected one of {}", Model::ALL.map(Model::name).join(", ")))
        })
    }
}

impl VaeConfig {
    /// Reads a diffusers `AutoencoderKL` `config.json`.
    pub fn from_diffusers_json(path: &Path) -> Result<VaeConfig> {
        let text = std::fs::read_to_string(path).map_err(|source| SdError::Io { path: path.into(), source })?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| SdError::Config(format!("{}: not valid JSON: {e}", path.display())))?;
        Self::from_diffusers_value(&v).map_err(|e| match e {
            SdError::Config(m) => SdError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    pub fn from_diffusers_value(v: &Value) -> Result<VaeConfig> {
        let obj = v.as_object().ok_or_else(|| SdError::Config("the config is not a JSON object".into()))?;
        let bad = |k: &str, what: &str| SdError::Config(format!("field {k:?} must be {what}, got {}", obj[k]));
        let usize_field = |k: &str, default: Option<usize>| -> Result<usize> {
            match obj.get(k) {
                None | Some(Value::Null) => default.ok_or_else(|| SdError::Config(format!("missing field {k:?}"))),
                Some(x) => {
                    x.as_u64().map(|x| x as usize).filter(|&x| x > 0).ok_or_else(|| bad(k, "a positive integer"))
                }
            }
        };
        let f64_field = |k: &str| -> Result<Option<f64>> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x.as_f64().map(Some).ok_or_else(|| bad(k, "a number")),
            }
        };
        let bool_field = |k: &str, default: bool| -> Result<bool> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(default),
                Some(x) => x.as_bool().ok_or_else(|| bad(k, "true or false")),
            }
        };
        let vec_field = |k: &str| -> Result<Option<Vec<f64>>> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| x.as_f64().ok_or_else(|| bad(k, "a list of numbers")))
                    .collect::<Result<_>>()
                    .map(Some),
                Some(_) => Err(bad(k, "a list of numbers")),
            }
        };
        if let Some(class) = obj.get("_class_name").and_then(Value::as_str)
            && class != "AutoencoderKL"
        {
            return Err(SdError::Config(format!("_class_name is {class:?}; only AutoencoderKL is supported")));
        }
        if let Some(act) = obj.get("act_fn").and_then(Value::as_str)
            && act != "silu"
        {
            return Err(SdError::Config(format!("act_fn {act:?} is not supported (only silu)")));
        }
        let block_out_channels: Vec<usize> = match obj.get("block_out_channels") {
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|x| x.as_u64().map(|x| x as usize).filter(|&x| x > 0))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("block_out_channels", "a list of positive integers"))?,
            Some(_) => return Err(bad("block_out_channels", "a non-empty list of positive integers")),
            None => return Err(SdError::Config("missing field \"block_out_channels\"".into())),
        };
        if let Some(types) = obj.get("up_block_types") {
            let types = types.as_array().ok_or_else(|| bad("up_block_types", "a list of block names"))?;
            if types.len() != block_out_channels.len() {
                return Err(SdError::Config(format!(
                    "{} up_block_types for {} block_out_channels",
                    types.len(),
                    block_out_channels.len()
                )));
            }
            if let Some(t) = types.iter().find(|t| t.as_str() != Some("UpDecoderBlock2D")) {
                return Err(SdError::Config(format!("up block type {t} is not supported (only UpDecoderBlock2D)")));
            }
        }
        if let Some(types) = obj.get("down_block_types") {
            let types = types.as_array().ok_or_else(|| bad("down_block_types", "a list of block names"))?;
            if types.len() != block_out_channels.len() {
                return Err(SdError::Config(format!(
                    "{} down_block_types for {} block_out_channels",
                    types.len(),
                    block_out_channels.len()
                )));
            }
            if let Some(t) = types.iter().find(|t| t.as_str() != Some("DownEncoderBlock2D")) {
                return Err(SdError::Config(format!("down block type {t} is not supported (only DownEncoderBlock2D)")));
            }
        }
        let cfg = VaeConfig {
            latent_channels: usize_field("latent_channels", Some(4))?,
            in_channels: usize_field("in_channels", Some(3))?,
            out_channels: usize_field("out_channels", Some(3))?,
            block_out_channels,
            layers_per_block: usize_field("layers_per_block", Some(1))?,
            norm_num_groups: usize_field("norm_num_groups", Some(32))?,
            use_quant_conv: bool_field("use_quant_conv", true)?,
            use_post_quant_conv: bool_field("use_post_quant_conv", true)?,
            mid_block_add_attention: bool_field("mid_block_add_attention", true)?,
            scaling_factor: f64_field("scaling_factor")?.unwrap_or(0.18215),
            shift_factor: f64_field("shift_factor")?,
            latents_mean: vec_field("latents_mean")?,
            latents_std: vec_field("latents_std")?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks what the decoder relies on: group counts divide every channel count, the
    /// scaling is usable, per-channel statistics match the latent channels.
    pub fn validate(&self) -> Result<()> {
        let err = |m: String| Err(SdError::Config(m));
        if self.block_out_channels.is_empty() {
            return err("block_out_channels is empty".into());
        }
        if let Some(&c) =
            self.block_out_channels.iter().find(|&&c| self.norm_num_groups == 0 || c % self.norm_num_groups != 0)
        {
            return err(format!("norm_num_groups {} does not divide block channel count {c}", self.norm_num_groups));
        }
        if !(self.scaling_factor.is_finite() && self.scaling_factor != 0.0) {
            return err(format!("scaling_factor {} must be a finite non-zero number", self.scaling_factor));
        }
        if self.latents_mean.is_some() != self.latents_std.is_some() {
            return err("latents_mean and latents_std must be given together".into());
        }
        for (name, v) in [("latents_mean", &self.latents_mean), ("latents_std", &self.latents_std)] {
            if let Some(v) = v
                && v.len() != self.latent_channels
            {
                return err(format!("{name} has {} entries for {} latent channels", v.len(), self.latent_channels));
            }
        }
        if self.latents_mean.is_some() && self.shift_factor.is_some() {
            return err("both shift_factor and latents_mean are set; a model uses one or the other".into());
        }
        Ok(())
    }

    /// Channels of the mid block (the top of the decoder).
    pub fn top_channels(&self) -> usize {
        *self.block_out_channels.last().expect("validated: non-empty")
    }

    pub fn num_up_blocks(&self) -> usize {
        self.block_out_channels.len()
    }

    /// Output size / latent size: 2 per upsampler, one upsampler per up block but the last.
    pub fn upscale(&self) -> usize {
        1 << (self.num_up_blocks() - 1)
    }

    /// `(in, out)` channels of each decoder up block, in execution order.
    pub fn up_block_channels(&self) -> Vec<(usize, usize)> {
        let rev: Vec<usize> = self.block_out_channels.iter().rev().copied().collect();
        let mut prev = rev[0];
        rev.iter()
            .map(|&out| {
                let pair = (prev, out);
                prev = out;
                pair
            })
            .collect()
    }

    /// Every tensor the decoder loads, in diffusers naming, with its shape: what the
    /// benchmark writes and what error messages can show.
    pub fn diffusers_tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut out = Vec::new();
        let conv = |out: &mut Vec<(String, Vec<usize>)>, name: String, i: usize, o: usize, k: usize| {
            out.push((format!("{name}.weight"), vec![o, i, k, k]));
            out.push((format!("{name}.bias"), vec![o]));
        };
        let norm = |out: &mut Vec<(String, Vec<usize>)>, name: String, c: usize| {
            out.push((format!("{name}.weight"), vec![c]));
            out.push((format!("{name}.bias"), vec![c]));
        };
        let resnet = |out: &mut Vec<(String, Vec<usize>)>, name: String, i: usize, o: usize| {
            norm(out, format!("{name}.norm1"), i);
            conv(out, format!("{name}.conv1"), i, o, 3);
            norm(out, format!("{name}.norm2"), o);
            conv(out, format!("{name}.conv2"), o, o, 3);
            if i != o {
                conv(out, format!("{name}.conv_shortcut"), i, o, 1);
            }
        };
        let (lat, top) = (self.latent_channels, self.top_channels());
        if self.use_post_quant_conv {
            conv(&mut out, "post_quant_conv".into(), lat, lat, 1);
        }
        conv(&mut out, "decoder.conv_in".into(), lat, top, 3);
        resnet(&mut out, "decoder.mid_block.resnets.0".into(), top, top);
        if self.mid_block_add_attention {
            let a = "decoder.mid_block.attentions.0";
            norm(&mut out, format!("{a}.group_norm"), top);
            for l in ["to_q", "to_k", "to_v", "to_out.0"] {
                out.push((format!("{a}.{l}.weight"), vec![top, top]));
                out.push((format!("{a}.{l}.bias"), vec![top]));
            }
        }
        resnet(&mut out, "decoder.mid_block.resnets.1".into(), top, top);
        let n = self.num_up_blocks();
        for (i, (cin, cout)) in self.up_block_channels().into_iter().enumerate() {
            for j in 0..=self.layers_per_block {
                resnet(&mut out, format!("decoder.up_blocks.{i}.resnets.{j}"), if j == 0 { cin } else { cout }, cout);
            }
            if i + 1 < n {
                conv(&mut out, format!("decoder.up_blocks.{i}.upsamplers.0.conv"), cout, cout, 3);
            }
        }
        norm(&mut out, "decoder.conv_norm_out".into(), self.block_out_channels[0]);
        conv(&mut out, "decoder.conv_out".into(), self.block_out_channels[0], self.out_channels, 3);
        out
    }

    /// Every tensor the encoder loads (quant_conv included), in diffusers naming, with its
    /// shape.
    pub fn encoder_tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut out = Vec::new();
        let conv = |out: &mut Vec<(String, Vec<usize>)>, name: String, i: usize, o: usize, k: usize| {
            out.push((format!("{name}.weight"), vec![o, i, k, k]));
            out.push((format!("{name}.bias"), vec![o]));
        };
        let norm = |out: &mut Vec<(String, Vec<usize>)>, name: String, c: usize| {
            out.push((format!("{name}.weight"), vec![c]));
            out.push((format!("{name}.bias"), vec![c]));
        };
        let resnet = |out: &mut Vec<(String, Vec<usize>)>, name: String, i: usize, o: usize| {
            norm(out, format!("{name}.norm1"), i);
            conv(out, format!("{name}.conv1"), i, o, 3);
            norm(out, format!("{name}.norm2"), o);
            conv(out, format!("{name}.conv2"), o, o, 3);
            if i != o {
                conv(out, format!("{name}.conv_shortcut"), i, o, 1);
            }
        };
        let (moments, top, c0) = (2 * self.latent_channels, self.top_channels(), self.block_out_channels[0]);
        conv(&mut out, "encoder.conv_in".into(), self.in_channels, c0, 3);
        for (i, (cin, cout)) in self.down_block_channels().into_iter().enumerate() {
            for j in 0..self.layers_per_block {
                resnet(&mut out, format!("encoder.down_blocks.{i}.resnets.{j}"), if j == 0 { cin } else { cout }, cout);
            }
            if i + 1 < self.block_out_channels.len() {
                conv(&mut out, format!("encoder.down_blocks.{i}.downsamplers.0.conv"), cout, cout, 3);
            }
        }
        resnet(&mut out, "encoder.mid_block.resnets.0".into(), top, top);
        if self.mid_block_add_attention {
            let a = "encoder.mid_block.attentions.0";
            norm(&mut out, format!("{a}.group_norm"), top);
            for l in ["to_q", "to_k", "to_v", "to_out.0"] {
                out.push((format!("{a}.{l}.weight"), vec![top, top]));
                out.push((format!("{a}.{l}.bias"), vec![top]));
            }
        }
        resnet(&mut out, "encoder.mid_block.resnets.1".into(), top, top);
        norm(&mut out, "encoder.conv_norm_out".into(), top);
        conv(&mut out, "encoder.conv_out".into(), top, moments, 3);
        if self.use_quant_conv {
            conv(&mut out, "quant_conv".into(), moments, moments, 1);
        }
        out
    }

    /// `(in, out)` channels of each encoder down block, in execution order (each has
    /// `layers_per_block` resnets; all but the last end with a stride-2 downsampler).
    pub fn down_block_channels(&self) -> Vec<(usize, usize)> {
        let mut prev = self.block_out_channels[0];
        self.block_out_channels
            .iter()
            .map(|&out| {
                let pair = (prev, out);
                prev = out;
                pair
            })
            .collect()
    }

    /// Number of decoder parameters (post_quant_conv included).
    pub fn decoder_param_count(&self) -> usize {
        self.diffusers_tensor_shapes().iter().map(|(_, s)| s.iter().product::<usize>()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_published_factors() {
        assert_eq!("SDXL".parse::<Model>().unwrap(), Model::Sdxl);
        assert!("sd4".parse::<Model>().unwrap_err().to_string().contains("sd, sdxl, sd3, flux"));
        let sd = Model::Sd.config();
        assert_eq!(sd.up_block_channels(), vec![(512, 512), (512, 512), (512, 256), (256, 128)]);
        assert_eq!(sd.upscale(), 8);
        // The SD 1.5 VAE decoder has 49.49 M parameters (post_quant_conv included).
        assert_eq!(sd.decoder_param_count(), 49_490_199);
        let flux = Model::Flux.config();
        assert_eq!((flux.latent_channels, flux.shift_factor, flux.use_post_quant_conv), (16, Some(0.1159), false));
        assert_eq!(Model::Sd3.config().scaling_factor, 1.5305);
        // The SD 1.5 VAE encoder has 34.16 M parameters (quant_conv included).
        let enc: usize = sd.encoder_tensor_shapes().iter().map(|(_, s)| s.iter().product::<usize>()).sum();
        assert_eq!(enc, 34_163_664);
        assert_eq!(sd.down_block_channels(), vec![(128, 128), (128, 256), (256, 512), (512, 512)]);
    }

    #[test]
    fn reads_diffusers_config_json() {
        let v: Value = serde_json::json!({
            "_class_name": "AutoencoderKL", "act_fn": "silu", "block_out_channels": [16, 24, 32, 32],
            "latent_channels": 16, "layers_per_block": 2, "norm_num_groups": 8, "scaling_factor": 0.3611,
            "shift_factor": 0.1159, "use_post_quant_conv": false,
            "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"]
        });
        let c = VaeConfig::from_diffusers_value(&v).unwrap();
        assert_eq!(c.block_out_channels, vec![16, 24, 32, 32]);
        assert_eq!((c.latent_channels, c.norm_num_groups, c.use_post_quant_conv), (16, 8, false));
        assert!(c.mid_block_add_attention);

        let mut bad = v.clone();
        bad["norm_num_groups"] = serde_json::json!(5);
        let e = VaeConfig::from_diffusers_value(&bad).unwrap_err().to_string();
        assert!(e.contains("does not divide"), "{e}");
        let mut bad = v.clone();
        bad["up_block_types"][1] = serde_json::json!("AttnUpDecoderBlock2D");
        let e = VaeConfig::from_diffusers_value(&bad).unwrap_err().to_string();
        assert!(e.contains("AttnUpDecoderBlock2D"), "{e}");
        let mut bad = v;
        bad["block_out_channels"] = serde_json::json!("wide");
        let e = VaeConfig::from_diffusers_value(&bad).unwrap_err().to_string();
        assert!(e.contains("block_out_channels"), "{e}");
    }
}
