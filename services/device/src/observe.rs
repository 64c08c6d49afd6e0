//! One device command for everything an observation needs: the UI dump, the focused window
//! and the keyboard's state run as one shell script whose sections are told apart on the host
//! by markers holding a fresh nonce (text on the screen cannot forge one). A section whose
//! command fails leaves its own part empty (or, for the dump, its error), not the others.
//! Through an adb server that is one connection and one device stream instead of three.
//! The UI section is `uiautomator dump` or the companion service's query (`portal`).

use crate::portal::UiSource;

/// The sections of an observation, in the order the script prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `uiautomator dump /dev/tty`.
    Ui,
    /// The focus and app-transition lines of `dumpsys window`.
    Window,
    /// The keyboard lines of `dumpsys input_method`.
    Ime,
}

impl Section {
    const ALL: [Section; 3] = [Section::Ui, Section::Window, Section::Ime];

    fn name(self) -> &'static str {
        match self {
            Section::Ui => "ui",
            Section::Window => "window",
            Section::Ime => "ime",
        }
    }

    /// The command of the section. The dumpsys output is filtered on the device: a phone's
    /// `dumpsys window` runs to hundreds of kilobytes, of which two lines are read.
    fn command(self, source: UiSource) -> std::borrow::Cow<'static, str> {
        match self {
            Section::Ui if source == UiSource::Portal => crate::portal::state_query().into(),
            Section::Ui => "uiautomator dump /dev/tty".into(),
            Section::Window => {
                "dumpsys window | grep -F -e mCurrentFocus= -e mFocusedApp= -e mAppTransitionState=".into()
            }
            Section::Ime => {
                "dumpsys input_method | grep -F -e mInputShown= -e mIsInputViewShown= -e isInputViewShown=".into()
            }
        }
    }
}

/// A fresh nonce for one observation's markers.
pub fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The script: each section's command, then a line `@@dm-NONCE SECTION STATUS@@` (printed on
/// a line of its own whatever the command printed last).
pub fn script(nonce: &str, source: UiSource) -> String {
    Section::ALL
        .iter()
        .map(|s| {
            format!(
                "{}; printf '\\n@@dm-{nonce} {} %s@@\\n' $?",
                s.command(source),
                s.name()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What one section printed, and its exit status when its marker came through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Part {
    pub text: String,
    /// `None`: the section's marker is missing (the script was cut short).
    pub status: Option<i32>,
}

/// The output of [`script`] split into its sections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Where the UI section came from.
    pub source: UiSource,
    pub ui: Part,
    pub window: Part,
    pub ime: Part,
}

impl Observed {
    pub fn part(&self, section: Section) -> &Part {
        match section {
            Section::Ui => &self.ui,
            Section::Window => &self.window,
            Section::Ime => &self.ime,
        }
    }

    fn part_mut(&mut self, section: Section) -> &mut Part {
        match section {
            Section::Ui => &mut self.ui,
            Section::Window => &mut self.window,
            Section::Ime => &mut self.ime,
        }
    }
}

/// Splits `output` at the markers of `nonce`. Text before the first marker is the first
/// section's; a section whose marker never came gets what is left (if it is the first
/// without one) and no status. Never panics, whatever the output.
pub fn split(output: &str, nonce: &str) -> Observed {
    let prefix = format!("@@dm-{nonce} ");
    let mut observed = Observed::default();
    let mut rest = output;
    for section in Section::ALL {
        let marker = format!("{prefix}{} ", section.name());
        match rest.find(&marker) {
            Some(at) => {
                let after = &rest[at + marker.len()..];
                let (status, tail) = match after.find("@@") {
                    Some(end) => (after[..end].trim().parse().ok(), &after[end + 2..]),
                    None => (None, after),
                };
                let part = observed.part_mut(section);
                // The newline the marker's printf starts with is not the section's.
                part.text = rest[..at]
                    .strip_suffix('\n')
                    .unwrap_or(&rest[..at])
                    .to_owned();
                part.status = status;
                rest = tail.strip_prefix('\n').unwrap_or(tail);
            }
            None => {
                observed.part_mut(section).text = rest.to_owned();
                break;
            }
        }
    }
    observed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn sections_are_split_at_their_markers_with_their_status() {
        let n = "abc";
        let out = "<?xml version='1.0'?><hierarchy/>UI hierchary dumped to: /dev/tty\n\
                   @@dm-abc ui 0@@\n  mCurrentFocus=Window{1 u0 a/b}\n\
                   @@dm-abc window 0@@\n\n@@dm-abc ime 1@@\n";
        let o = split(out, n);
        assert_eq!(
            o.ui.text,
            "<?xml version='1.0'?><hierarchy/>UI hierchary dumped to: /dev/tty"
        );
        assert_eq!(o.ui.status, Some(0));
        assert_eq!(o.window.text, "  mCurrentFocus=Window{1 u0 a/b}");
        assert_eq!(
            o.ime,
            Part {
                text: String::new(),
                status: Some(1)
            }
        );
    }

    #[test]
    fn a_marker_with_another_nonce_is_text_and_a_cut_output_keeps_what_came() {
        let o = split(
            "<hierarchy text='@@dm-evil ui 0@@'/>\n@@dm-good ui 0@@\nfocus",
            "good",
        );
        assert_eq!(o.ui.text, "<hierarchy text='@@dm-evil ui 0@@'/>");
        assert_eq!(
            o.window,
            Part {
                text: "focus".into(),
                status: None
            }
        );
        assert_eq!(o.ime, Part::default());
    }

    #[test]
    fn the_script_names_each_section_once() {
        let s = script("n1", UiSource::Uiautomator);
        for name in ["ui", "window", "ime"] {
            assert_eq!(s.matches(&format!("@@dm-n1 {name} %s@@")).count(), 1, "{s}");
        }
    }

    proptest::proptest! {
        #[test]
        fn splitting_never_panics(out in ".{0,400}", nonce in "[a-z0-9]{0,8}") {
            let _ = split(&out, &nonce);
        }
    }
}
