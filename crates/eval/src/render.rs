//! Filling a task's text with an instance's values: `{{name}}` or `{{name.field}}`. Double
//! braces leave the single braces of JavaScript and JSON alone.
use crate::params::Values;

/// `text` with every placeholder replaced, or the first placeholder that names no value.
pub fn render(text: &str, values: &Values) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(format!(
                "`{{{{` at byte {} is not closed by `}}}}`",
                text.len() - rest.len() + open
            ));
        };
        let name = after[..close].trim();
        let (param, field) = match name.split_once('.') {
            Some((p, f)) => (p, Some(f)),
            None => (name, None),
        };
        let value = values
            .get(param)
            .ok_or_else(|| format!("`{{{{{name}}}}}` names no parameter of this task"))?;
        let part = value.part(field).ok_or_else(|| match field {
            Some(f) => format!("`{{{{{name}}}}}`: parameter {param} has no field {f}"),
            None => {
                format!("`{{{{{name}}}}}`: parameter {param} is a table: name one of its fields")
            }
        })?;
        out.push_str(part);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Value;
    use std::collections::BTreeMap;

    fn values() -> Values {
        BTreeMap::from([
            ("name".to_owned(), Value::Word("Zoë".into())),
            (
                "state".to_owned(),
                Value::Fields(BTreeMap::from([("word".into(), "on".into())])),
            ),
        ])
    }

    #[test]
    fn placeholders_are_filled_and_single_braces_kept() {
        let js = "if (x) { tap(find('{{name}}')); } // {{ state.word }}";
        assert_eq!(
            render(js, &values()).unwrap(),
            "if (x) { tap(find('Zoë')); } // on"
        );
    }

    #[test]
    fn a_placeholder_without_a_value_is_named() {
        let e = render("{{who}}", &values()).unwrap_err();
        assert!(e.contains("{{who}}") && e.contains("no parameter"), "{e}");
        let e = render("{{state}}", &values()).unwrap_err();
        assert!(e.contains("is a table"), "{e}");
        let e = render("{{state.nope}}", &values()).unwrap_err();
        assert!(e.contains("no field nope"), "{e}");
        let e = render("a {{name", &values()).unwrap_err();
        assert!(e.contains("not closed"), "{e}");
    }
}
