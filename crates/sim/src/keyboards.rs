//! The keyboard apps a simulated phone may have besides its own keyboard: the companion app
//! (`com.mobilerun.portal`, which also reads the screen through accessibility) and ADBKeyBoard
//! (`com.android.adbkeyboard`). Installing one adds its package and input method; the companion
//! also turns on its accessibility service. Each types the way the app itself does: the
//! companion's keyboard commits text while it is the selected input method and otherwise sets
//! the focused field through accessibility; ADBKeyBoard listens for its broadcasts only while
//! it is the selected input method (its receiver lives in the input method's service).
use crate::device::Device;

/// The companion's package.
pub const PORTAL_PACKAGE: &str = "com.mobilerun.portal";
/// The companion's input method.
pub const PORTAL_IME: &str = "com.mobilerun.portal/.input.MobilerunKeyboardIME";
/// The companion's accessibility service, as `enabled_accessibility_services` names it.
pub const PORTAL_A11Y: &str =
    "com.mobilerun.portal/com.mobilerun.portal.service.MobilerunAccessibilityService";
/// ADBKeyBoard's package.
pub const ADB_KEYBOARD_PACKAGE: &str = "com.android.adbkeyboard";
/// ADBKeyBoard's input method.
pub const ADB_KEYBOARD_IME: &str = "com.android.adbkeyboard/.AdbIME";
/// The phone's own keyboard.
pub const LATIN_IME: &str = "com.android.inputmethod.latin/.LatinIME";

const A11Y_KEY: &str = "secure:enabled_accessibility_services";
const DEFAULT_IME_KEY: &str = "secure:default_input_method";
const ENABLED_IMES_KEY: &str = "secure:enabled_input_methods";

impl Device {
    /// Installs (or removes) the companion app: its package, its input method and its
    /// accessibility service, turned on as the app asks the user to.
    pub fn set_portal(&mut self, on: bool) {
        self.portal = on;
        let mut services: Vec<String> = self
            .settings
            .get(A11Y_KEY)
            .map(|v| {
                v.split(':')
                    .filter(|s| !s.is_empty() && *s != PORTAL_A11Y)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if on {
            services.push(PORTAL_A11Y.to_owned());
        }
        if services.is_empty() {
            self.settings.remove(A11Y_KEY);
            self.settings.remove("secure:accessibility_enabled");
        } else {
            self.settings.insert(A11Y_KEY.into(), services.join(":"));
            self.settings
                .insert("secure:accessibility_enabled".into(), "1".into());
        }
        if !on {
            self.forget_ime(PORTAL_IME);
        }
    }

    /// Installs (or removes) ADBKeyBoard.
    pub fn set_adb_keyboard(&mut self, on: bool) {
        self.adb_keyboard = on;
        if !on {
            self.forget_ime(ADB_KEYBOARD_IME);
        }
    }

    /// A removed input method leaves the enabled list, and the phone's own keyboard takes its
    /// place if it was selected.
    fn forget_ime(&mut self, id: &str) {
        if let Some(list) = self.settings.get(ENABLED_IMES_KEY) {
            let kept: Vec<&str> = list.split(':').filter(|s| *s != id).collect();
            let kept = kept.join(":");
            self.settings.insert(ENABLED_IMES_KEY.into(), kept);
        }
        if self.settings.get(DEFAULT_IME_KEY).is_some_and(|v| v == id) {
            self.settings
                .insert(DEFAULT_IME_KEY.into(), LATIN_IME.into());
        }
    }

    /// The input methods installed, the phone's own first.
    pub fn installed_imes(&self) -> Vec<&'static str> {
        let mut all = vec![LATIN_IME];
        if self.portal {
            all.push(PORTAL_IME);
        }
        if self.adb_keyboard {
            all.push(ADB_KEYBOARD_IME);
        }
        all
    }

    /// The packages the keyboard apps add.
    pub fn keyboard_packages(&self) -> Vec<&'static str> {
        let mut all = Vec::new();
        if self.portal {
            all.push(PORTAL_PACKAGE);
        }
        if self.adb_keyboard {
            all.push(ADB_KEYBOARD_PACKAGE);
        }
        all
    }

    /// Whether `id` is the selected input method (and installed).
    pub fn ime_selected(&self, id: &str) -> bool {
        self.installed_imes().contains(&id)
            && self.settings.get(DEFAULT_IME_KEY).is_some_and(|v| v == id)
    }

    /// Whether the companion's accessibility service is on.
    pub fn portal_a11y_on(&self) -> bool {
        self.portal
            && self
                .settings
                .get(A11Y_KEY)
                .is_some_and(|v| v.split(':').any(|s| s == PORTAL_A11Y))
    }

    /// Commits `text` to the focused field as a keyboard does (every character, whatever
    /// the script); `clear` first empties it. False when no field has focus.
    pub fn commit_text(&mut self, text: &str, clear: bool) -> bool {
        let Some(key) = self.focused_field() else {
            return false;
        };
        if clear {
            self.fields.insert(key, String::new());
        }
        self.type_text(text);
        true
    }
}

/// Base64 as Android's `Base64.DEFAULT` decoder reads it (line breaks and padding optional);
/// `None` when it is not base64 or not UTF-8.
pub fn decode_b64(s: &str) -> Option<String> {
    use base64::Engine;
    let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    String::from_utf8(engine.decode(clean).ok()?).ok()
}
