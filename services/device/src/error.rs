//! The device service's error type, its [`ServiceErrorCode`] per kind, and `Result` alias.
use droidmesh_runtime::{ServiceError, ServiceErrorCode};

/// Everything that can go wrong in the device service.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// `uiautomator dump` output that is not a usable UI hierarchy.
    #[error("ui dump could not be parsed: {detail}")]
    UiDump { detail: String },
    /// Output of another device command that did not have the expected shape.
    #[error("unexpected output from `{command}` on device {serial}: {detail}")]
    BadOutput {
        serial: String,
        command: String,
        detail: String,
    },
    /// No device with this serial is known.
    #[error("device {serial} is not known; list devices to see the serials available")]
    UnknownDevice { serial: String },
    /// The device is leased by someone else (asked for a lease).
    #[error("device {serial} is leased by {holder} until {expires_at_ms} (unix ms)")]
    LeaseHeld {
        serial: String,
        holder: String,
        expires_at_ms: i64,
    },
    /// The lease given is no longer the device's: another lease holds it now. Who holds it is
    /// not said: the caller's lease ended, and the new holder may be another tenant's task.
    #[error(
        "the lease given for device {serial} is no longer valid: the device is held under another lease now; acquire it again"
    )]
    LeaseReplaced { serial: String },
    /// An action was attempted without a valid lease on a free device.
    #[error("no lease held on device {serial}; acquire one first")]
    NoLease { serial: String },
    /// Every known device is leased.
    #[error("every device is leased: {holders}")]
    AllBusy { holders: String },
    /// No device is known at all.
    #[error("no devices are attached; connect one or start the simulator")]
    NoDevices,
    /// The request is malformed or asks for something impossible.
    #[error("{0}")]
    InvalidArgument(String),
    /// The device or the adb server could not be reached or dropped the call.
    #[error("device {serial} is unavailable: {detail}")]
    Unavailable { serial: String, detail: String },
    /// A device command did not finish in time.
    #[error("`{command}` on device {serial} did not finish within {timeout_ms} ms")]
    Timeout {
        serial: String,
        command: String,
        timeout_ms: u64,
    },
    /// The adb server or device refused a request.
    #[error("adb request failed for {target}: {detail}")]
    Adb { target: String, detail: String },
    /// A screenshot could not be decoded, resized or encoded.
    #[error("screenshot processing failed: {0}")]
    Image(String),
    /// A screenshot cannot be masked with certainty (a typed secret shows outside its field).
    #[error("the screenshot of device {serial} is withheld: {reason}")]
    ScreenshotWithheld { serial: String, reason: String },
    /// Text the device cannot type without a keyboard app, on a device that has none.
    #[error(
        "{detail}; device {serial} has no keyboard app for other text: install the companion app (com.mobilerun.portal) or ADBKeyBoard (com.android.adbkeyboard) and type again"
    )]
    NoKeyboardApp { serial: String, detail: String },
    /// The device already masks as many secrets of the current lease as it keeps.
    #[error(
        "device {serial} already masks {limit} secrets typed under this lease, as many as it keeps: nothing more is typed as sensitive until the lease ends; release it and take a new one"
    )]
    TooManySecrets { serial: String, limit: usize },
    /// The configuration is invalid.
    #[error("invalid device service configuration: {0}")]
    Config(String),
    /// `ConnectDevice` while `device.allow_connect` is off.
    #[error(
        "attaching phones by address is turned off on this device service: list them in device.direct_devices or attach them to its adb server, or set device.allow_connect = true to let callers of its port attach them"
    )]
    ConnectOff,
    /// A phone could not be attached by address. What answered there (nothing, another
    /// protocol, a phone that refused the key) is only in the service's log.
    #[error(
        "could not attach a phone at {address}: check that a phone listens for ADB over TCP there and allows this device service's key (the device service's log says what happened)"
    )]
    AttachFailed { address: String },
}

impl ServiceError for DeviceError {
    fn error_code(&self) -> ServiceErrorCode {
        use ServiceErrorCode as C;
        match self {
            DeviceError::UnknownDevice { .. } => C::NotFound,
            DeviceError::LeaseHeld { .. }
            | DeviceError::LeaseReplaced { .. }
            | DeviceError::NoLease { .. }
            | DeviceError::NoDevices
            | DeviceError::ScreenshotWithheld { .. }
            | DeviceError::NoKeyboardApp { .. } => C::Conflict,
            DeviceError::AllBusy { .. } | DeviceError::TooManySecrets { .. } => C::TooManyRequests,
            DeviceError::InvalidArgument(_) | DeviceError::Config(_) => C::BadRequest,
            DeviceError::Unavailable { .. }
            | DeviceError::Timeout { .. }
            | DeviceError::UiDump { .. }
            | DeviceError::AttachFailed { .. } => C::Unavailable,
            DeviceError::BadOutput { .. } | DeviceError::Adb { .. } | DeviceError::Image(_) => {
                C::Internal
            }
            DeviceError::ConnectOff => C::Forbidden,
        }
    }

    /// A message may repeat what a caller sent (an unknown serial): escaped and bounded, it is
    /// safe to print, and fits in the response's headers.
    fn public_message(&self) -> String {
        let message = self.to_string();
        crate::printable::printable(&message, crate::printable::MAX_MESSAGE_BYTES).into_owned()
    }
}

/// Result alias for the device service.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;
