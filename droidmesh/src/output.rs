//! Standard output for a command-line tool: a reader that goes away (`droidmesh state x |
//! head`) ends the process quietly with status 0, as `cat` into `head` does, instead of the
//! panic `println!` raises on a broken pipe.
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
