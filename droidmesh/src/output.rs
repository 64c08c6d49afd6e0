//! Standard output for a command-line tool: a reader that goes away (`droidmesh state x |
//! head`) ends the process quietly with status 0, as `cat` into `head` does, instead of the
//! panic `println!` raises on a broken pipe. And an error as the user reads it: its causes
//! after it, each said once.
use std::io::Write;

/// Writes one line to standard output and flushes it.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| {
        out.write_all(b"\n")?;
        out.flush()
    });
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        // Any other failure of standard output (a full disk) is said once, on stderr.
        let _ = writeln!(
            std::io::stderr(),
            "error: cannot write to standard output: {e}"
        );
        std::process::exit(1);
    }
}

/// `println!` that ends quietly when the reader has gone.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// An error with its causes, `: ` between them, each said once: a cause whose words are in
/// the text already (`cannot bind 127.0.0.1:50050: Address already in use` over the
/// `Address already in use` it wraps) is not said again.
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let words = cause.to_string();
        if words.is_empty() || text.contains(&words) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&words);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        let bind =
            anyhow::Error::new(io).context("cannot bind 127.0.0.1:1: Address already in use");
        let e = bind.context("cannot serve gateway");
        assert_eq!(
            error_text(&e),
            "cannot serve gateway: cannot bind 127.0.0.1:1: Address already in use"
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&e), "outer: inner");
    }
}
