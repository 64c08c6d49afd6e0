//! How checks find a value in text: as whole words, so "14" is in "Android 14." but not in
//! "2014" or "14.5".

/// Whether `needle` occurs in `haystack` as whole words: "14" is in "Android 14." but not in
/// "2014" or "14.5" (a number is not read into a longer one).
pub fn names(haystack: &str, needle: &str) -> bool {
    let part_of_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after_text = &haystack[at + needle.len()..];
        let mut after = after_text.chars();
        let next = after.next();
        // "14." at the end of a sentence is a whole number; "14.5" is not.
        let decimal = next == Some('.') && after.next().is_some_and(|c| c.is_ascii_digit());
        !part_of_word(before) && !part_of_word(next) && !decimal
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_names_a_value_only_as_whole_words() {
        assert!(names("android 14.", "14"));
        assert!(names("it is 87%", "87%"));
        assert!(names("zoë müller's number is +49 30", "zoë müller"));
        assert!(!names("android 2014", "14"));
        assert!(!names("version 14.5", "14"));
        assert!(!names("1487", "14"));
    }
}
