//! The ncnn `.param` text format, as ncnn's `Net::load_param` and `ParamDict::load_param`
//! (src/net.cpp, src/paramdict.cpp) read it:
//!
//! ```text
//! 7767517                                   magic
//! 55 63                                     layer count, blob count
//! Convolution conv0 1 1 in0 c0 0=32 1=3 -23310=1,1.000000e-01
//! type        name  #in #out inputs outputs key=value ...
//! ```
//!
//! A key `k` in `0..32` holds one int or float; a key written `-23300 - k` holds an array
//! `count,v1,v2,...` for parameter `k`. A value is a float when its text contains `.`, `e`
//! or `E`, an int otherwise (ncnn's `vstr_is_float`).
//!
//! Stricter than ncnn, on purpose (a malformed file is an error, never a guess): one layer
//! per line; every token fully parsed (ncnn's `sscanf("%d")` stops at the first non-digit);
//! no duplicate keys (ncnn keeps the last); no array mixing ints and floats (ncnn stores both
//! in one union and would read one as the other's bits); no non-finite floats.
//! Floats are parsed correctly rounded by Rust; ncnn's own `vstr_to_float` accumulates in
//! double and agrees on every value the Real-CUGAN files contain.

use std::collections::BTreeMap;

use super::NcnnError;

/// First line of every text `.param` file ncnn accepts.
pub const MAGIC: i64 = 7767517;

/// ncnn's `NCNN_MAX_PARAM_COUNT`: parameter ids are `0..32`.
pub const MAX_PARAM_ID: u32 = 32;

/// Array keys are written as `-23300 - id`.
const ARRAY_KEY_BASE: i64 = -23300;

/// One parameter value as written in the file.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Int(i32),
    Float(f32),
    IntArray(Vec<i32>),
    FloatArray(Vec<f32>),
}

impl ParamValue {
    /// Human-readable kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ParamValue::Int(_) => "int",
            ParamValue::Float(_) => "float",
            ParamValue::IntArray(_) => "int array",
            ParamValue::FloatArray(_) => "float array",
        }
    }
}

/// The `k=v` parameters of one layer, by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamDict {
    entries: BTreeMap<u32, ParamValue>,
}

impl ParamDict {
    /// The value of parameter `id`, if the file sets it.
    pub fn get(&self, id: u32) -> Option<&ParamValue> {
        self.entries.get(&id)
    }

    /// Every id the file sets, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.keys().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// One layer line, before its parameters are interpreted for its type.
#[derive(Debug, Clone, PartialEq)]
pub struct RawLayer {
    /// 1-based line number in the `.param` file.
    pub line: usize,
    pub ty: String,
    pub name: String,
    pub bottoms: Vec<String>,
    pub tops: Vec<String>,
    pub params: ParamDict,
}

/// A parsed `.param` file: header counts and layer lines, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamFile {
    pub layer_count: usize,
    pub blob_count: usize,
    pub layers: Vec<RawLayer>,
}

/// Parse the text of a `.param` file. Checks the syntax and the declared layer count;
/// the blob graph and per-type parameters are checked by [`super::NcnnModel`].
pub fn parse(text: &str) -> Result<ParamFile, NcnnError> {
    // Blank lines carry nothing (ncnn's fscanf skips whitespace, newlines included).
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());

    let (line, magic) =
        lines.next().ok_or(NcnnError::Syntax { line: 1, msg: "empty file, expected magic 7767517".into() })?;
    if magic.parse::<i64>() != Ok(MAGIC) {
        return Err(NcnnError::BadMagic { line, found: magic.chars().take(40).collect() });
    }

    let (line, header) = lines
        .next()
        .ok_or(NcnnError::Syntax { line: line + 1, msg: "missing 'layer_count blob_count' line".into() })?;
    let counts: Vec<&str> = header.split_whitespace().collect();
    let parse_count = |s: &str, what: &str| {
        s.parse::<usize>()
            .map_err(|_| NcnnError::Syntax { line, msg: format!("{what} '{s}' is not a non-negative integer") })
    };
    if counts.len() != 2 {
        return Err(NcnnError::Syntax { line, msg: format!("expected 'layer_count blob_count', found '{header}'") });
    }
    let layer_count = parse_count(counts[0], "layer count")?;
    let blob_count = parse_count(counts[1], "blob count")?;

    let layers = lines.map(|(line, text)| parse_layer(line, text)).collect::<Result<Vec<_>, _>>()?;
    if layers.len() != layer_count {
        return Err(NcnnError::LayerCountMismatch { declared: layer_count, found: layers.len() });
    }
    Ok(ParamFile { layer_count, blob_count, layers })
}

fn parse_layer(line: usize, text: &str) -> Result<RawLayer, NcnnError> {
    let mut tokens = text.split_whitespace();
    // split_whitespace on a non-empty trimmed line yields at least one token.
    let ty = tokens.next().unwrap_or_default().to_string();
    let name =
        tokens.next().ok_or_else(|| NcnnError::Syntax { line, msg: format!("layer of type '{ty}' has no name") })?;
    let name = name.to_string();
    let bad = |msg: String| NcnnError::InvalidParam { line, layer: name.clone(), ty: ty.clone(), msg };
    let mut count = |what: &str| -> Result<usize, NcnnError> {
        let tok = tokens.next().ok_or_else(|| bad(format!("missing {what}")))?;
        tok.parse::<usize>().map_err(|_| bad(format!("{what} '{tok}' is not a non-negative integer")))
    };
    let n_bottom = count("input blob count")?;
    let n_top = count("output blob count")?;
    let mut names = |n: usize, what: &str| -> Result<Vec<String>, NcnnError> {
        // No capacity from the file's number: it is untrusted.
        let mut v = Vec::new();
        for i in 0..n {
            let tok = tokens.next().ok_or_else(|| bad(format!("declares {n} {what} blobs, found only {i}")))?;
            if tok.contains('=') {
                return Err(bad(format!("declares {n} {what} blobs, found only {i} before parameter '{tok}'")));
            }
            v.push(tok.to_string());
        }
        Ok(v)
    };
    let bottoms = names(n_bottom, "input")?;
    let tops = names(n_top, "output")?;

    let mut params = ParamDict::default();
    for tok in tokens {
        let (id, value) = parse_kv(tok).map_err(|msg| bad(format!("parameter '{tok}': {msg}")))?;
        if params.entries.insert(id, value).is_some() {
            return Err(bad(format!("parameter {id} is set twice")));
        }
    }
    Ok(RawLayer { line, ty, name, bottoms, tops, params })
}

fn parse_kv(tok: &str) -> Result<(u32, ParamValue), String> {
    let (key, value) = tok.split_once('=').ok_or("expected key=value")?;
    let key: i64 = key.parse().map_err(|_| format!("key '{key}' is not an integer"))?;
    let in_range = |id: i64| -> Result<u32, String> {
        u32::try_from(id)
            .ok()
            .filter(|&id| id < MAX_PARAM_ID)
            .ok_or_else(|| format!("parameter id {id} is outside 0..{MAX_PARAM_ID}"))
    };
    if key <= ARRAY_KEY_BASE {
        let id = in_range(ARRAY_KEY_BASE - key)?;
        Ok((id, parse_array(value)?))
    } else if key < 0 {
        Err(format!("negative key {key} is neither a parameter id nor an array key (<= -23300)"))
    } else {
        Ok((in_range(key)?, parse_scalar(value)?))
    }
}

fn is_float_text(s: &str) -> bool {
    s.contains(['.', 'e', 'E'])
}

fn parse_int(s: &str) -> Result<i32, String> {
    s.parse::<i32>().map_err(|_| format!("'{s}' is not a 32-bit integer"))
}

fn parse_float(s: &str) -> Result<f32, String> {
    let v: f32 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if v.is_finite() { Ok(v) } else { Err(format!("'{s}' is not finite as a 32-bit float")) }
}

fn parse_scalar(s: &str) -> Result<ParamValue, String> {
    if is_float_text(s) { parse_float(s).map(ParamValue::Float) } else { parse_int(s).map(ParamValue::Int) }
}

fn parse_array(s: &str) -> Result<ParamValue, String> {
    let mut parts = s.split(',');
    let len_text = parts.next().unwrap_or_default();
    let len: usize =
        len_text.parse().map_err(|_| format!("array length '{len_text}' is not a non-negative integer"))?;
    let items: Vec<&str> = parts.collect();
    if items.len() != len {
        return Err(format!("array declares {len} elements, has {}", items.len()));
    }
    let floats = items.iter().filter(|v| is_float_text(v)).count();
    if floats == 0 {
        items.iter().map(|v| parse_int(v)).collect::<Result<_, _>>().map(ParamValue::IntArray)
    } else if floats == items.len() {
        items.iter().map(|v| parse_float(v)).collect::<Result<_, _>>().map(ParamValue::FloatArray)
    } else {
        Err("array mixes integers and floats".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_and_arrays() {
        let f =
            parse("7767517\n1 1\nConvolution c 0 1 out 0=32 1=3 -23310=1,1.000000e-01 -23309=2,4,-4 4=0.5\n").unwrap();
        let p = &f.layers[0].params;
        assert_eq!(p.get(0), Some(&ParamValue::Int(32)));
        assert_eq!(p.get(1), Some(&ParamValue::Int(3)));
        assert_eq!(p.get(10), Some(&ParamValue::FloatArray(vec![0.1])));
        assert_eq!(p.get(9), Some(&ParamValue::IntArray(vec![4, -4])));
        assert_eq!(p.get(4), Some(&ParamValue::Float(0.5)));
        assert_eq!(p.get(2), None);
        assert_eq!(p.ids().collect::<Vec<_>>(), vec![0, 1, 4, 9, 10]);
        assert_eq!(f.layers[0].line, 3);
        assert_eq!(f.layers[0].tops, vec!["out".to_string()]);
    }

    #[test]
    fn empty_array_and_blank_lines() {
        let f = parse("\n7767517\n\n1 1\n\nCrop c 0 1 x -23311=0\n\n").unwrap();
        assert_eq!(f.layers[0].params.get(11), Some(&ParamValue::IntArray(vec![])));
        assert_eq!(f.layers[0].line, 6);
    }

    fn syntax_err(text: &str) -> NcnnError {
        parse(text).expect_err(text)
    }

    #[test]
    fn magic_and_header_errors() {
        assert!(matches!(syntax_err("7767518\n0 0\n"), NcnnError::BadMagic { line: 1, .. }));
        assert!(matches!(syntax_err(""), NcnnError::Syntax { line: 1, .. }));
        assert!(matches!(syntax_err("7767517\n"), NcnnError::Syntax { line: 2, .. }));
        assert!(matches!(syntax_err("7767517\n1\n"), NcnnError::Syntax { line: 2, .. }));
        assert!(matches!(syntax_err("7767517\n-1 2\n"), NcnnError::Syntax { line: 2, .. }));
        assert!(matches!(
            syntax_err("7767517\n2 1\nInput in0 0 1 in0\n"),
            NcnnError::LayerCountMismatch { declared: 2, found: 1 }
        ));
    }

    #[test]
    fn layer_line_errors_name_the_layer_and_line() {
        let cases = [
            "Convolution c0 1 1 a b 0=abc",
            "Convolution c0 1 1 a b 0=1.5e99",
            "Convolution c0 1 1 a b 0=nan",
            "Convolution c0 1 1 a b -23310=2,1.0",
            "Convolution c0 1 1 a b -23310=2,1.0,2",
            "Convolution c0 1 1 a b 32=1",
            "Convolution c0 1 1 a b -5=1",
            "Convolution c0 1 1 a b -23332=1,1",
            "Convolution c0 1 1 a b 0=1 0=2",
            "Convolution c0 1 1 a b 0",
            "Convolution c0 1 2 a b",
            "Convolution c0 1 2 a b 0=1",
            "Convolution c0 x 1 a b",
            "Convolution c0 1",
            "Convolution c0 1 1 a b 0=12abc",
        ];
        for case in cases {
            let text = format!("7767517\n2 3\nInput in 0 1 a\n{case}\n");
            match syntax_err(&text) {
                NcnnError::InvalidParam { line, layer, ty, .. } => {
                    assert_eq!((line, layer.as_str(), ty.as_str()), (4, "c0", "Convolution"), "{case}");
                }
                other => panic!("{case}: unexpected {other:?}"),
            }
        }
        assert!(matches!(syntax_err("7767517\n1 1\nConvolution\n"), NcnnError::Syntax { line: 3, .. }));
    }
}
