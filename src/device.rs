//! Where tensors live and convolutions run.

use crate::error::{Error, Result};
use conv_engine::{Budget, CpuConv};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A compute device: a cheap handle that carries the device's convolution engine (its
/// dispatcher, plan cache and workspace budget).
#[derive(Clone)]
pub struct Device {
    kind: DeviceKind,
    cpu_conv: Arc<CpuConv>,
}

/// Which device a [`Device`] handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu,
}

impl Device {
    /// The CPU with the default 64 MiB convolution workspace budget. All handles from
    /// this function share one engine, so plans made for one tensor serve the next.
    pub fn cpu() -> Device {
        static SHARED: OnceLock<Arc<CpuConv>> = OnceLock::new();
        Device { kind: DeviceKind::Cpu, cpu_conv: SHARED.get_or_init(|| Arc::new(CpuConv::default())).clone() }
    }

    /// The CPU with its own engine and workspace budget.
    pub fn cpu_with_budget(budget: Budget) -> Device {
        Device { kind: DeviceKind::Cpu, cpu_conv: Arc::new(CpuConv::new(budget)) }
    }

    /// The CPU with a given engine (e.g. restricted to some algorithms).
    pub fn cpu_with_engine(engine: CpuConv) -> Device {
        Device { kind: DeviceKind::Cpu, cpu_conv: Arc::new(engine) }
    }

    /// `auto` and `cpu` give the CPU. (`rocm` and `rocm:N` arrive with the ROCm backend.)
    pub fn parse(s: &str) -> Result<Device> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "cpu" => Ok(Device::cpu()),
            other if other == "rocm" || other.starts_with("rocm:") => {
                Err(Error::Device(format!("device {s:?}: this build has no ROCm backend yet; use --device cpu")))
            }
            _ => Err(Error::DeviceParse { input: s.to_string() }),
        }
    }

    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    pub fn is_cpu(&self) -> bool {
        self.kind == DeviceKind::Cpu
    }

    /// The CPU convolution engine of this handle.
    pub fn cpu_conv(&self) -> &CpuConv {
        &self.cpu_conv
    }

    pub(crate) fn candle(&self) -> candle_core::Device {
        candle_core::Device::Cpu
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            DeviceKind::Cpu => write!(f, "cpu"),
        }
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_names() {
        assert!(Device::parse("auto").unwrap().is_cpu());
        assert!(Device::parse("CPU").unwrap().is_cpu());
        let e = Device::parse("gpu").unwrap_err().to_string();
        assert!(e.contains("\"gpu\"") && e.contains("rocm:N"), "{e}");
        let e = Device::parse("rocm:1").unwrap_err().to_string();
        assert!(e.contains("no ROCm backend"), "{e}");
    }
}
