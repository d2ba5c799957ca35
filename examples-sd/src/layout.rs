//! Weight key layouts: diffusers' and the original CompVis/ldm (SD) / BFL (FLUX) one,
//! each with or without a `first_stage_model.` or `vae.` prefix.
//!
//! | diffusers | original |
//! | --- | --- |
//! | `decoder.mid_block.resnets.{0,1}` | `decoder.mid.block_{1,2}` |
//! | `decoder.mid_block.attentions.0.{group_norm,to_q,to_k,to_v,to_out.0}` (Linear) | `decoder.mid.attn_1.{norm,q,k,v,proj_out}` (1x1 conv) |
//! | `decoder.up_blocks.{i}.resnets.{j}` | `decoder.up.{n-1-i}.block.{j}` |
//! | `….conv_shortcut` | `….nin_shortcut` |
//! | `decoder.up_blocks.{i}.upsamplers.0.conv` | `decoder.up.{n-1-i}.upsample.conv` |
//! | `decoder.conv_norm_out` | `decoder.norm_out` |
//!
//! The encoder (`encoder.` instead of `decoder.`, plus `quant_conv`) maps the same way,
//! except that its blocks keep their order: `encoder.down_blocks.{i}.resnets.{j}` is
//! `encoder.down.{i}.block.{j}` and `….downsamplers.0.conv` is `encoder.down.{i}.downsample.conv`.

use crate::error::{Result, SdError};
use rocm_vision::Weights;
use std::fmt;

/// Key prefixes a VAE may sit under: a standalone VAE file, a full SD checkpoint, and
/// diffusers' single-file convention.
pub const PREFIXES: [&str; 3] = ["", "first_stage_model.", "vae."];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyStyle {
    Diffusers,
    Original,
}

/// Where a decoder's tensors are in a file: the naming style and the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLayout {
    pub style: KeyStyle,
    /// `""` or a prefix ending in `.`.
    pub prefix: String,
    /// Number of up blocks (the original layout numbers them in reverse).
    pub num_up_blocks: usize,
}

impl fmt::Display for KeyLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let style = match self.style {
            KeyStyle::Diffusers => "diffusers",
            KeyStyle::Original => "original (CompVis/ldm, BFL)",
        };
        if self.prefix.is_empty() {
            write!(f, "{style} layout")
        } else {
            write!(f, "{style} layout, prefix {:?}", self.prefix)
        }
    }
}

/// Keys whose presence identifies a style (both must be there) for a `part` of the VAE
/// (`"decoder"` or `"encoder"`).
fn sentinels(style: KeyStyle, part: &str) -> [String; 2] {
    match style {
        KeyStyle::Diffusers => [format!("{part}.conv_in.weight"), format!("{part}.mid_block.resnets.0.conv1.weight")],
        KeyStyle::Original => [format!("{part}.conv_in.weight"), format!("{part}.mid.block_1.conv1.weight")],
    }
}

impl KeyLayout {
    /// Finds the one layout `w`'s decoder uses; an error lists the keys looked for and
    /// some keys the file has.
    pub fn detect(w: &Weights, num_up_blocks: usize) -> Result<KeyLayout> {
        Self::detect_part(w, "decoder", num_up_blocks)
    }

    /// Finds the one layout `w`'s encoder uses (`num_blocks`: its down blocks).
    pub fn detect_encoder(w: &Weights, num_blocks: usize) -> Result<KeyLayout> {
        Self::detect_part(w, "encoder", num_blocks)
    }

    fn detect_part(w: &Weights, part: &str, num_up_blocks: usize) -> Result<KeyLayout> {
        let mut found = Vec::new();
        for style in [KeyStyle::Diffusers, KeyStyle::Original] {
            for prefix in PREFIXES {
                if sentinels(style, part).iter().all(|k| w.contains(&format!("{prefix}{k}"))) {
                    found.push(KeyLayout { style, prefix: prefix.to_string(), num_up_blocks });
                }
            }
        }
        match found.len() {
            1 => Ok(found.pop().expect("one")),
            0 => {
                let [a, b] = sentinels(KeyStyle::Diffusers, part);
                let [_, c] = sentinels(KeyStyle::Original, part);
                Err(SdError::UnknownLayout {
                    path: w.path().to_path_buf(),
                    expected: format!(
                        "{a:?} with {b:?} (diffusers) or with {c:?} (original), \
                         each with no prefix or under \"first_stage_model.\" or \"vae.\""
                    ),
                    count: w.keys().count(),
                    found: w.keys().take(6).map(str::to_string).collect(),
                })
            }
            _ => Err(SdError::WeightsMismatch {
                path: w.path().to_path_buf(),
                msg: format!(
                    "ambiguous: the file holds more than one VAE {part} ({})",
                    found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                ),
            }),
        }
    }

    fn key(&self, rest: impl fmt::Display) -> String {
        format!("{}{rest}", self.prefix)
    }

    pub fn post_quant_conv(&self) -> String {
        self.key("post_quant_conv")
    }

    pub fn conv_in(&self) -> String {
        self.key("decoder.conv_in")
    }

    /// Mid-block resnet 0 or 1.
    pub fn mid_resnet(&self, i: usize) -> String {
        self.mid_resnet_of("decoder", i)
    }

    /// Mid-block resnet 0 or 1 of `part` (`"encoder"` or `"decoder"`).
    pub fn mid_resnet_of(&self, part: &str, i: usize) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("{part}.mid_block.resnets.{i}")),
            KeyStyle::Original => self.key(format_args!("{part}.mid.block_{}", i + 1)),
        }
    }

    pub fn attention(&self) -> String {
        self.attention_of("decoder")
    }

    /// The mid-block attention of `part` (`"encoder"` or `"decoder"`).
    pub fn attention_of(&self, part: &str) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("{part}.mid_block.attentions.0")),
            KeyStyle::Original => self.key(format_args!("{part}.mid.attn_1")),
        }
    }

    /// Sub-layer names of the attention: norm, q, k, v, out.
    pub fn attention_parts(&self) -> [&'static str; 5] {
        match self.style {
            KeyStyle::Diffusers => ["group_norm", "to_q", "to_k", "to_v", "to_out.0"],
            KeyStyle::Original => ["norm", "q", "k", "v", "proj_out"],
        }
    }

    /// Resnet `j` of up block `i` (execution order, as diffusers numbers them).
    pub fn up_resnet(&self, i: usize, j: usize) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("decoder.up_blocks.{i}.resnets.{j}")),
            KeyStyle::Original => self.key(format_args!("decoder.up.{}.block.{j}", self.num_up_blocks - 1 - i)),
        }
    }

    pub fn shortcut(&self) -> &'static str {
        match self.style {
            KeyStyle::Diffusers => "conv_shortcut",
            KeyStyle::Original => "nin_shortcut",
        }
    }

    pub fn upsampler_conv(&self, i: usize) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("decoder.up_blocks.{i}.upsamplers.0.conv")),
            KeyStyle::Original => self.key(format_args!("decoder.up.{}.upsample.conv", self.num_up_blocks - 1 - i)),
        }
    }

    pub fn norm_out(&self) -> String {
        self.norm_out_of("decoder")
    }

    /// The final GroupNorm of `part` (`"encoder"` or `"decoder"`).
    pub fn norm_out_of(&self, part: &str) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("{part}.conv_norm_out")),
            KeyStyle::Original => self.key(format_args!("{part}.norm_out")),
        }
    }

    pub fn conv_out(&self) -> String {
        self.key("decoder.conv_out")
    }

    // The encoder's keys.

    pub fn quant_conv(&self) -> String {
        self.key("quant_conv")
    }

    pub fn encoder_conv_in(&self) -> String {
        self.key("encoder.conv_in")
    }

    /// Resnet `j` of down block `i` (both layouts number down blocks from the input side).
    pub fn down_resnet(&self, i: usize, j: usize) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("encoder.down_blocks.{i}.resnets.{j}")),
            KeyStyle::Original => self.key(format_args!("encoder.down.{i}.block.{j}")),
        }
    }

    pub fn downsampler_conv(&self, i: usize) -> String {
        match self.style {
            KeyStyle::Diffusers => self.key(format_args!("encoder.down_blocks.{i}.downsamplers.0.conv")),
            KeyStyle::Original => self.key(format_args!("encoder.down.{i}.downsample.conv")),
        }
    }

    pub fn encoder_conv_out(&self) -> String {
        self.key("encoder.conv_out")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn original_numbering_is_reversed() {
        let l = KeyLayout { style: KeyStyle::Original, prefix: "first_stage_model.".into(), num_up_blocks: 4 };
        assert_eq!(l.up_resnet(0, 2), "first_stage_model.decoder.up.3.block.2");
        assert_eq!(l.upsampler_conv(2), "first_stage_model.decoder.up.1.upsample.conv");
        assert_eq!(l.mid_resnet(1), "first_stage_model.decoder.mid.block_2");
        assert_eq!(l.norm_out(), "first_stage_model.decoder.norm_out");
        let d = KeyLayout { style: KeyStyle::Diffusers, prefix: String::new(), num_up_blocks: 4 };
        assert_eq!(d.up_resnet(3, 0), "decoder.up_blocks.3.resnets.0");
        assert_eq!(d.upsampler_conv(0), "decoder.up_blocks.0.upsamplers.0.conv");
        assert_eq!(d.attention(), "decoder.mid_block.attentions.0");
        // The encoder keeps the down blocks' order in both layouts.
        assert_eq!(l.down_resnet(1, 0), "first_stage_model.encoder.down.1.block.0");
        assert_eq!(l.downsampler_conv(2), "first_stage_model.encoder.down.2.downsample.conv");
        assert_eq!(l.attention_of("encoder"), "first_stage_model.encoder.mid.attn_1");
        assert_eq!(d.downsampler_conv(0), "encoder.down_blocks.0.downsamplers.0.conv");
        assert_eq!(d.norm_out_of("encoder"), "encoder.conv_norm_out");
    }
}
