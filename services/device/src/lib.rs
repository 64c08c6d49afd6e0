//! The device service: DeviceService over an adb server or direct ADB-over-TCP, with leases, UI state and screenshots.
//!
//! Entry point: [`device_service`] builds the tonic server from a [`DeviceConfig`].
pub mod actions;
pub mod adb;
mod attach;
pub mod config;
pub mod device_output;
pub mod error;
pub mod input;
pub mod labels;
pub mod lease;
pub mod mask_set;
pub mod mask_store;
pub mod metrics;
pub mod observe;
pub mod portal;
pub mod printable;
pub mod registry;
pub mod screenshot;
pub mod secret_fields;
pub mod service;
pub mod settle;
pub mod shots;
pub mod state;
pub mod status;
pub mod type_text;
pub mod typing;
pub mod ui_dump;

pub use config::DeviceConfig;
pub use error::{DeviceError, Result};
pub use service::{DeviceServiceImpl, device_service};
