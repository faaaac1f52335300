//! A reason cut to its column so that groups sharing a long prefix stay apart: four groups
//! reading `rejected: customer <uuid> not found in billin…` at 80 columns differ only after
//! the cut. Where the difference lies past what fits, the shared middle gives way to `…` and
//! the part where this group differs from the others shows.

use qdeck_model::sanitize::{clean, clean_short};

/// `sig` in at most `width` characters, showing where it differs from every one of `others`.
pub fn distinct(sig: &str, others: &[&str], width: usize) -> String {
    let text: Vec<char> = clean(sig).chars().collect();
    if text.len() <= width || width < 12 {
        return clean_short(sig, width);
    }
    // Where this signature parts from the one it shares most with.
    let shared = others
        .iter()
        .filter(|o| **o != sig)
        .map(|o| {
            clean(o)
                .chars()
                .zip(text.iter())
                .take_while(|(a, b)| a == *b)
                .count()
        })
        .max()
        .unwrap_or(0);
    if shared < width.saturating_sub(1) {
        return clean_short(sig, width);
    }
    // A head that says what kind of failure it is, `…`, then the text from the word where
    // the difference lies, cut to what is left.
    let head = width / 3;
    let word = text[..shared]
        .iter()
        .rposition(|c| c.is_whitespace())
        .map_or(0, |i| i + 1);
    let from = if shared - word <= 20 {
        word
    } else {
        shared.saturating_sub(6)
    }
    .max(head);
    let mut out: String = text[..head].iter().collect();
    out.push('…');
    let room = width - head - 1;
    let tail: Vec<char> = text[from..].to_vec();
    if tail.len() <= room {
        out.extend(tail);
    } else {
        out.extend(&tail[..room - 1]);
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_sharing_a_prefix_show_where_they_differ() {
        let a = "rejected: customer <uuid> not found in billing-eu (tenant acme)";
        let b = "rejected: customer <uuid> not found in billing-us (tenant acme)";
        let c = "timeout";
        let all = [a, b, c];
        let (sa, sb) = (distinct(a, &all, 40), distinct(b, &all, 40));
        assert_ne!(sa, sb);
        assert!(
            sa.contains("billing-eu") && sb.contains("billing-us"),
            "{sa} / {sb}"
        );
        assert!(sa.starts_with("rejected: cus"), "{sa}");
        assert!(sa.chars().count() <= 40, "{sa}");
        // What fits, or differs early, is cut as before.
        assert_eq!(distinct(c, &all, 40), "timeout");
        let d = "a very long reason that differs right at the start, nothing shared";
        assert_eq!(distinct(d, &all, 20), clean_short(d, 20));
    }
}
