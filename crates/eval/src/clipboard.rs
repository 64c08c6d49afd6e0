//! The clipboard check's reading: the phone's clipboard as the clipboard helper app
//! (`ca.zgrs.clipper`) answers `am broadcast -a clipper.get` — `Broadcast completed:
//! result=-1, data="TEXT"` for a text, `result=0, data=""` while it is empty — and whether
//! it holds what a task wants.
use crate::words::names;

/// The command that reads the clipboard.
pub const GET: &str = "am broadcast -a clipper.get";

/// Longest part of the clipboard a finding shows, in characters.
const SHOWN: usize = 200;

/// The clipboard's text from `am broadcast -a clipper.get`'s output: `Some` for a text,
/// `None` while it is empty; `Err` when the helper did not answer (it is not installed).
pub fn parse(output: &str) -> Result<Option<String>, String> {
    let missing = || {
        format!(
            "the clipboard could not be read: `{GET}` answered {:?}, without the clipboard helper's data; the phone needs the clipboard helper app (ca.zgrs.clipper)",
            output.chars().take(SHOWN).collect::<String>()
        )
    };
    let at = output
        .find("Broadcast completed: result=")
        .ok_or_else(missing)?;
    let line = &output[at + "Broadcast completed: result=".len()..];
    let (code, rest) = line.split_once(", data=\"").ok_or_else(missing)?;
    // The data is printed as it is, quotes and line breaks included: it ends at the last quote.
    let end = rest.rfind('"').ok_or_else(missing)?;
    let data = &rest[..end];
    match code.trim() {
        "-1" => Ok(Some(data.to_owned())),
        "0" if data.is_empty() => Ok(None),
        other => Err(format!(
            "the clipboard could not be read: the clipboard helper answered result={other}, data={data:?}"
        )),
    }
}

/// Whether `found` (the clipboard, `None` when empty) is `equals` (all of it, surrounding
/// whitespace aside) and holds `contains` as whole words; and what was found, in words.
pub fn judge(found: Option<&str>, equals: Option<&str>, contains: Option<&str>) -> (bool, String) {
    let mut wants = Vec::new();
    if let Some(e) = equals {
        wants.push(format!("exactly {e:?}"));
    }
    if let Some(c) = contains {
        wants.push(format!("{c:?} as whole words"));
    }
    let want = wants.join(" and ");
    let Some(text) = found else {
        return (
            false,
            format!("the clipboard is empty; the task wants {want}"),
        );
    };
    let success = equals.is_none_or(|e| text.trim() == e.trim())
        && contains.is_none_or(|c| names(text, c.trim()));
    let shown: String = text.chars().take(SHOWN).collect();
    let more = if text.chars().count() > SHOWN {
        "…"
    } else {
        ""
    };
    (
        success,
        if success {
            format!("the clipboard holds {shown:?}{more}, as the task wants")
        } else {
            format!("the clipboard holds {shown:?}{more}; the task wants {want}")
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helpers_answer_is_read_whatever_the_text_holds() {
        let out = |code: i32, data: &str| {
            format!(
                "Broadcasting: Intent {{ act=clipper.get flg=0x400000 }}\nBroadcast completed: result={code}, data=\"{data}\"\n"
            )
        };
        assert_eq!(
            parse(&out(-1, "+44 20 7946 0101")).unwrap().as_deref(),
            Some("+44 20 7946 0101")
        );
        let odd = "Zoë \"quoted\", data=\"x\"\nsecond line 李雷";
        assert_eq!(parse(&out(-1, odd)).unwrap().as_deref(), Some(odd));
        assert_eq!(parse(&out(-1, "")).unwrap().as_deref(), Some(""));
        assert_eq!(parse(&out(0, "")).unwrap(), None);
        // No helper: the broadcast reaches nobody and carries no data.
        let e = parse("Broadcasting: Intent { act=clipper.get flg=0x400000 }\nBroadcast completed: result=0\n")
            .unwrap_err();
        assert!(e.contains("clipboard helper app"), "{e}");
        assert!(parse("").is_err());
        assert!(parse(&out(0, "refused")).is_err());
    }

    #[test]
    fn equals_is_the_whole_text_and_contains_whole_words() {
        let number = "+1 617 555 0103";
        assert!(judge(Some(" +1 617 555 0103\n"), Some(number), None).0);
        assert!(!judge(Some("+1 617 555 01034"), Some(number), None).0);
        assert!(judge(Some("Call +1 617 555 0103."), None, Some(number)).0);
        assert!(!judge(Some("+1 617 555 01034"), None, Some(number)).0);
        let (ok, detail) = judge(Some("Ada"), Some("Ada"), Some("Alan"));
        assert!(!ok);
        assert_eq!(
            detail,
            "the clipboard holds \"Ada\"; the task wants exactly \"Ada\" and \"Alan\" as whole words"
        );
        let (ok, detail) = judge(None, Some(number), None);
        assert!(!ok);
        assert_eq!(
            detail,
            "the clipboard is empty; the task wants exactly \"+1 617 555 0103\""
        );
        let long = "é".repeat(500);
        let (_, detail) = judge(Some(&long), Some("x"), None);
        assert!(
            detail.contains("…;") && detail.chars().count() < 300,
            "{detail}"
        );
    }
}
