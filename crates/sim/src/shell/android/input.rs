//! `input`: taps, swipes (held for their duration), text and key events, with the usage
//! text and errors of Android 14's `input`. `input text` types only what the virtual keyboard's
//! character map produces (printable ASCII, a line break, a tab): any other character makes the
//! whole command fail as on a phone, typing nothing.
use super::int;
use crate::device::Device;
use crate::shell::Output;

const INPUT_USAGE: &str = "Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n\nThe sources are:\n      keyboard\n      touchscreen\n\nThe commands and default sources are:\n      text <string> (Default: keyboard)\n      keyevent [--longpress|--doubletap] <key code number or name> ... (Default: keyboard)\n      tap <x> <y> (Default: touchscreen)\n      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n      draganddrop <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n      press (Default: trackball)\n      motionevent <DOWN|UP|MOVE|CANCEL> <x> <y> (Default: touchscreen)\n";

/// `input ...`; also how long the gesture lasts (a swipe's duration), in ms.
pub(super) fn input(dev: &mut Device, args: &[String]) -> (Output, u64) {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if matches!(
        args.first(),
        Some(
            &("touchscreen" | "keyboard" | "touchpad" | "mouse" | "stylus" | "dpad" | "trackball")
        )
    ) {
        args.remove(0);
    }
    if args.first() == Some(&"-d") {
        args.drain(..args.len().min(2));
    }
    let bad = |msg: &str| Output::fail(1, format!("Error: {msg}\n{INPUT_USAGE}"));
    let out = match args.as_slice() {
        ["tap", x, y] => match (int(x), int(y)) {
            (Some(x), Some(y)) => {
                dev.tap(x, y);
                Output::default()
            }
            _ => bad("tap needs numeric coordinates"),
        },
        ["swipe" | "draganddrop", x1, y1, x2, y2, rest @ ..] if rest.len() <= 1 => {
            let pts = (int(x1), int(y1), int(x2), int(y2));
            let dur = rest.first().map_or(Some(300), |d| d.parse::<u64>().ok());
            match (pts, dur) {
                ((Some(x1), Some(y1), Some(x2), Some(y2)), Some(dur)) => {
                    dev.swipe(x1, y1, x2, y2, dur);
                    return (Output::default(), dur);
                }
                _ => bad("swipe needs numeric coordinates and duration"),
            }
        }
        // Android 14 types the first argument and ignores the rest.
        ["text", text, ..] => text_command(dev, text),
        ["text"] => {
            exception("java.lang.IllegalArgumentException: Argument expected after \"text\"")
        }
        ["keyevent", codes @ ..] if !codes.is_empty() => {
            for code in codes.iter().filter(|c| !c.starts_with("--")) {
                match keycode(code) {
                    Some(k) => dev.key(k),
                    None => return (bad(&format!("Unknown keycode: {code}")), 0),
                }
            }
            Output::default()
        }
        ["motionevent", action, x, y] => match (int(x), int(y)) {
            // DOWN puts a finger down, UP lifts it: a tap where it barely moved, else a swipe.
            (Some(x), Some(y)) => match action.to_ascii_uppercase().as_str() {
                "DOWN" => {
                    dev.pointer = Some((x, y));
                    Output::default()
                }
                "MOVE" => Output::default(),
                "UP" => {
                    if let Some((x0, y0)) = dev.pointer.take() {
                        dev.swipe(x0, y0, x, y, 100);
                    }
                    Output::default()
                }
                "CANCEL" => {
                    dev.pointer = None;
                    Output::default()
                }
                _ => bad(&format!("Unknown motionevent action: {action}")),
            },
            _ => bad("motionevent needs numeric coordinates"),
        },
        ["press"] => Output::default(),
        [] => Output::fail(1, INPUT_USAGE),
        [cmd, ..] => bad(&format!("Unknown command: {cmd}")),
    };
    (out, 0)
}

pub(super) fn keycode(code: &str) -> Option<u32> {
    if let Ok(n) = code.parse::<u32>() {
        return (n < 400).then_some(n);
    }
    let name = code.strip_prefix("KEYCODE_").unwrap_or(code);
    let named = match name {
        "HOME" => 3,
        "BACK" => 4,
        "CALL" => 5,
        "ENDCALL" => 6,
        "DPAD_UP" => 19,
        "DPAD_DOWN" => 20,
        "DPAD_LEFT" => 21,
        "DPAD_RIGHT" => 22,
        "DPAD_CENTER" => 23,
        "VOLUME_UP" => 24,
        "VOLUME_DOWN" => 25,
        "POWER" => 26,
        "CAMERA" => 27,
        "TAB" => 61,
        "SPACE" => 62,
        "ENTER" => 66,
        "DEL" => 67,
        "MENU" => 82,
        "SEARCH" => 84,
        "ESCAPE" => 111,
        "FORWARD_DEL" => 112,
        "MOVE_HOME" => 122,
        "MOVE_END" => 123,
        "APP_SWITCH" => 187,
        "WAKEUP" => 224,
        "SLEEP" => 223,
        "CUT" => 277,
        "COPY" => 278,
        "PASTE" => 279,
        n if n.len() == 1 => {
            let c = n.chars().next()?;
            return match c {
                '0'..='9' => Some(7 + c.to_digit(10)?),
                'A'..='Z' => Some(29 + (c as u32 - 'A' as u32)),
                _ => None,
            };
        }
        _ => return None,
    };
    Some(named)
}

/// How a failed `cmd input` ends: the exception on stderr after a blank line, status 255.
fn exception(what: &str) -> Output {
    Output::fail(
        255,
        format!(
            "\nException occurred while executing 'text':\n{what}\n\tat com.android.server.input.InputShellCommand.sendText(InputShellCommand.java:319)\n\tat com.android.server.input.InputShellCommand.runText(InputShellCommand.java:291)\n\tat com.android.server.input.InputShellCommand.onCommand(InputShellCommand.java:232)\n\tat com.android.modules.utils.BasicShellCommandHandler.exec(BasicShellCommandHandler.java:97)\n\tat android.os.ShellCommand.exec(ShellCommand.java:38)\n\tat com.android.server.input.InputManagerService.onShellCommand(InputManagerService.java:3297)\n\tat android.os.Binder.shellCommand(Binder.java:1068)\n\tat android.os.Binder.onTransact(Binder.java:888)"
        ),
    )
}

/// `input text TEXT`: `%s` is a space (a `%` before an `s` is taken with it, so a literal
/// `%s` cannot be written); then every character must have a key on the virtual keyboard, or
/// nothing is typed and the command fails with the phone's exception.
fn text_command(dev: &mut Device, text: &str) -> Output {
    let text = percent_s(text);
    if !text.chars().all(has_key) {
        return exception("java.lang.NullPointerException: Attempt to get length of null array");
    }
    dev.type_text(&text);
    Output::default()
}

/// `%s` read as a space, as `input` reads it: a `%` arms the escape, and an `s` right after
/// an armed `%` replaces both with a space.
pub(super) fn percent_s(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut armed = false;
    for c in text.chars() {
        if armed && c == 's' {
            out.pop();
            out.push(' ');
            armed = false;
            continue;
        }
        armed = c == '%';
        out.push(c);
    }
    out
}

/// Whether the virtual keyboard's character map has a key for `c`.
fn has_key(c: char) -> bool {
    c == ' ' || c == '\n' || c == '\t' || c.is_ascii_graphic()
}

#[cfg(test)]
mod tests {
    use super::percent_s;

    #[test]
    fn percent_s_is_a_space_however_it_is_written() {
        assert_eq!(percent_s("a%sb"), "a b");
        assert_eq!(percent_s("100%%s"), "100% ");
        assert_eq!(percent_s("50% off%"), "50% off%");
        assert_eq!(percent_s("%s%s"), "  ");
        assert_eq!(percent_s("%ss"), " s");
    }
}
