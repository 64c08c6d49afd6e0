//! The phone's clipboard: one text each phone owns, empty at start and after a reset. An app's
//! copy button puts text there (the `copy TEMPLATE` action), `input keyevent KEYCODE_PASTE`
//! types it into the focused field, and the clipboard helper app every phone has
//! (`ca.zgrs.clipper`) reads and sets it by broadcast, as checks read it:
//! `am broadcast -a clipper.get` answers `result=-1, data="TEXT"`, or `result=0, data=""`
//! while the clipboard is empty; `am broadcast -a clipper.set -e text TEXT` sets it.
use crate::device::Device;

/// The clipboard helper app's package (installed by the user, so `pm list packages -3` shows it).
pub const CLIPPER_PACKAGE: &str = "ca.zgrs.clipper";

/// The broadcast that reads the clipboard.
pub const ACTION_GET: &str = "clipper.get";
/// The broadcast that sets the clipboard from its `text` extra.
pub const ACTION_SET: &str = "clipper.set";

/// Longest text the clipboard keeps, in characters; a longer copy is cut.
pub const MAX_CLIP_CHARS: usize = 65_536;

/// `KEYCODE_PASTE`.
pub const KEYCODE_PASTE: u32 = 279;

/// What a broadcast's receiver answered: its result code and data (`am broadcast` prints
/// `Broadcast completed: result=CODE, data="DATA"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: i32,
    pub data: String,
}

/// Android's `Activity.RESULT_OK`.
const RESULT_OK: i32 = -1;
/// Android's `Activity.RESULT_CANCELED`.
const RESULT_CANCELED: i32 = 0;

impl Device {
    /// Puts `text` on the clipboard (cut to [`MAX_CLIP_CHARS`]).
    pub fn copy(&mut self, text: &str) {
        let kept: String = text.chars().take(MAX_CLIP_CHARS).collect();
        // The log says how much was copied, never what (it may be a secret).
        self.log(
            'I',
            "ClipboardService",
            format!("copied {} characters", kept.chars().count()),
        );
        self.clipboard = Some(kept);
    }

    /// Types the clipboard into the focused field; nothing without text or a field.
    pub fn paste(&mut self) {
        if let Some(text) = self.clipboard.clone()
            && self.focused_field().is_some()
        {
            self.type_text(&text);
        }
    }

    /// The clipboard helper's receiver: `Some` for its two actions, `None` for any other
    /// broadcast (it does not receive those).
    pub fn clipper_receive(&mut self, action: &str, text: Option<&str>) -> Option<Reply> {
        match action {
            ACTION_GET => Some(match &self.clipboard {
                Some(clip) => Reply {
                    code: RESULT_OK,
                    data: clip.clone(),
                },
                None => Reply {
                    code: RESULT_CANCELED,
                    data: String::new(),
                },
            }),
            ACTION_SET => Some(match text {
                Some(text) => {
                    self.copy(text);
                    Reply {
                        code: RESULT_OK,
                        data: "Text is copied into clipboard.".into(),
                    }
                }
                None => Reply {
                    code: RESULT_CANCELED,
                    data: "No text is provided. Use -e text \"text to be pasted\"".into(),
                },
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::apps::AppSet;

    #[test]
    fn a_long_copy_is_cut_and_only_the_helpers_actions_are_answered() {
        let mut dev = Device::new(Arc::new(AppSet::default_set().unwrap()), "sim");
        assert_eq!(
            dev.clipper_receive(ACTION_GET, None),
            Some(Reply {
                code: 0,
                data: String::new()
            })
        );
        dev.copy(&"é".repeat(MAX_CLIP_CHARS + 3));
        let got = dev.clipper_receive(ACTION_GET, None).unwrap();
        assert_eq!((got.code, got.data.chars().count()), (-1, MAX_CLIP_CHARS));
        assert_eq!(dev.clipper_receive("clipper.other", Some("x")), None);
        // The log names the length only.
        assert!(
            dev.log
                .iter()
                .any(|e| e.message == format!("copied {MAX_CLIP_CHARS} characters"))
        );
    }
}
