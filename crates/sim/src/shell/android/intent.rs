//! Intents as `am` reads them from its arguments and prints them back (`Intent { act=…
//! cat=[…] dat=… flg=0x… pkg=… cmp=… }`, the short form of Android's `Intent.toString`).

/// What `am start` or `am broadcast` was asked for, and the options around it.
#[derive(Debug, Default)]
pub struct Intent {
    pub action: Option<String>,
    pub categories: Vec<String>,
    pub data: Option<String>,
    pub mime: Option<String>,
    pub flags: u32,
    pub package: Option<String>,
    pub component: Option<String>,
    pub extras: bool,
    /// The extras as given: (option, key, value), e.g. `("--es", "msg", "aGk=")`.
    pub extra: Vec<(String, String, String)>,
    /// `-W`: wait for the launch and report it.
    pub wait: bool,
    /// `-S`: force-stop the app first.
    pub stop_first: bool,
}

/// Extra options that take a key and a value (`--es KEY VALUE`).
const EXTRAS_2: &[&str] = &[
    "-e", "--es", "--ez", "--ei", "--el", "--ef", "--ed", "--eu", "--ecn", "--eia", "--eial",
    "--ela", "--elal", "--efa", "--efal", "--esa", "--esal",
];

/// Options that take one value and do not change the intent.
const OPTIONS_1: &[&str] = &[
    "--user",
    "--display",
    "--windowingMode",
    "--activityType",
    "--task",
    "-R",
    "-P",
    "--start-profiler",
    "--sampling",
    "--attach-agent",
    "--attach-agent-bind",
    "--receiver-permission",
    "--esn",
];

impl Intent {
    /// The value of extra `key`, if given.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .rev()
            .find(|(_, k, _)| k == key)
            .map(|(_, _, v)| v.as_str())
    }

    /// Reads `am`'s intent arguments; an error names what was wrong.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut i = Self::default();
        let mut it = args.iter();
        let need = |it: &mut std::slice::Iter<'_, String>, opt: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("Argument expected after \"{opt}\""))
        };
        while let Some(a) = it.next() {
            match a.as_str() {
                "-a" => i.action = Some(need(&mut it, a)?),
                "-c" => i.categories.push(need(&mut it, a)?),
                "-d" => i.data = Some(need(&mut it, a)?),
                "-t" => i.mime = Some(need(&mut it, a)?),
                "-n" => i.component = Some(need(&mut it, a)?),
                "-p" => i.package = Some(need(&mut it, a)?),
                "-f" => {
                    let v = need(&mut it, a)?;
                    let n = match v.strip_prefix("0x") {
                        Some(h) => u32::from_str_radix(h, 16),
                        None => v.parse(),
                    };
                    i.flags |= n.map_err(|_| format!("Invalid int: {v}"))?;
                }
                "-W" => i.wait = true,
                "-S" => i.stop_first = true,
                o if EXTRAS_2.contains(&o) => {
                    let key = need(&mut it, a)?;
                    let value = need(&mut it, a)?;
                    i.extra.push((o.to_owned(), key, value));
                    i.extras = true;
                }
                o if OPTIONS_1.contains(&o) => {
                    need(&mut it, a)?;
                }
                o if o.starts_with('-') => {}
                o if o.contains('/') && i.component.is_none() => i.component = Some(o.to_owned()),
                o if o.contains(':') && i.data.is_none() => i.data = Some(o.to_owned()),
                o => i.package = Some(o.to_owned()),
            }
        }
        Ok(i)
    }

    /// `Intent { … }`; `launched` adds the NEW_TASK flag `am start` sets before starting.
    pub fn describe(&self, launched: bool) -> String {
        let mut parts = Vec::new();
        if let Some(a) = &self.action {
            parts.push(format!("act={a}"));
        }
        if !self.categories.is_empty() {
            parts.push(format!("cat=[{}]", self.categories.join(",")));
        }
        if let Some(d) = &self.data {
            parts.push(format!("dat={}", safe_uri(d)));
        }
        if let Some(t) = &self.mime {
            parts.push(format!("typ={t}"));
        }
        let flags = self.flags | if launched { 0x1000_0000 } else { 0 };
        if flags != 0 {
            parts.push(format!("flg=0x{flags:x}"));
        }
        if let Some(p) = &self.package {
            parts.push(format!("pkg={p}"));
        }
        if let Some(c) = &self.component {
            parts.push(format!("cmp={}", short_component(c)));
        }
        if self.extras {
            parts.push("(has extras)".into());
        }
        format!("Intent {{ {} }}", parts.join(" "))
    }
}

/// `pkg/pkg.Name` as Android prints it: `pkg/.Name`.
pub fn short_component(c: &str) -> String {
    match c.split_once('/') {
        Some((pkg, cls)) => match cls.strip_prefix(pkg) {
            Some(rest) if rest.starts_with('.') => format!("{pkg}/{rest}"),
            _ => c.to_owned(),
        },
        None => c.to_owned(),
    }
}

/// A URI as `Uri.toSafeString` shows it: web addresses cut to `scheme://host/...`, dialled or
/// mailed addresses masked, others without query or fragment.
fn safe_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return uri.to_owned();
    };
    match scheme.to_ascii_lowercase().as_str() {
        "http" | "https" | "ftp" | "rtsp" => {
            let host = rest
                .trim_start_matches("//")
                .split(['/', '?', '#'])
                .next()
                .unwrap_or("");
            format!("{scheme}://{host}/...")
        }
        "tel" | "sip" | "sms" | "smsto" | "mailto" | "nfc" => {
            let masked: String = rest
                .chars()
                .map(|c| if matches!(c, '-' | '@' | '.') { c } else { 'x' })
                .collect();
            format!("{scheme}:{masked}")
        }
        _ => format!("{scheme}:{}", rest.split(['?', '#']).next().unwrap_or("")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn intents_print_as_android_prints_them() {
        let i = Intent::parse(&args("-W -a android.intent.action.MAIN -c android.intent.category.LAUNCHER -f 0x10200000 -n com.a/com.a.Main --es k v")).unwrap();
        assert_eq!(
            i.describe(false),
            "Intent { act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] flg=0x10200000 cmp=com.a/.Main (has extras) }"
        );
        assert!(i.wait);
        let v = Intent::parse(&args(
            "-a android.intent.action.VIEW -d https://x.org/secret?q=1",
        ))
        .unwrap();
        assert_eq!(
            v.describe(true),
            "Intent { act=android.intent.action.VIEW dat=https://x.org/... flg=0x10000000 }"
        );
        assert_eq!(safe_uri("tel:555-1234"), "tel:xxx-xxxx");
        assert!(Intent::parse(&args("-a")).is_err());
        assert!(Intent::parse(&args("-f zz")).is_err());
    }
}
