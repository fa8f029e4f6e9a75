//! The few Java semantics the ElasticJob ports depend on, reproduced bit for bit.

/// Java's `String.hashCode()`: `h = 31 * h + c` over the UTF-16 code units, wrapping at 32 bits.
pub(crate) fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Java's `Math.abs(int)`, which leaves `Integer.MIN_VALUE` negative.
pub(crate) fn abs(h: i32) -> i32 {
    h.wrapping_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashCode table of the ElasticJob reference (§5.1, verified there with a JDK 17
    /// program): name, `hashCode()`, `Math.abs(h)`, and `Math.abs(h) % n` for n = 2, 3, 4, 5.
    /// Java's `%` truncates like Rust's, so the remainders are checked with plain `%`.
    const TABLE: &[(&str, i32, i32, [i32; 4])] = &[
        ("", 0, 0, [0, 0, 0, 0]),
        ("0", 48, 48, [0, 0, 0, 3]),
        ("1", 49, 49, [1, 1, 1, 4]),
        ("2", 50, 50, [0, 2, 2, 0]),
        ("3", 51, 51, [1, 0, 3, 1]),
        ("a", 97, 97, [1, 1, 1, 2]),
        ("ab", 3105, 3105, [1, 0, 1, 0]),
        ("abc", 96354, 96354, [0, 0, 2, 4]),
        ("test_job", -1146456432, 1146456432, [0, 0, 0, 2]),
        ("JobName", 226556872, 226556872, [0, 1, 0, 2]),
        ("myJob", 104343153, 104343153, [1, 0, 1, 3]),
        ("javaSimpleJob", -694093655, 694093655, [1, 2, 3, 0]),
        ("SimpleJob", -120431477, 120431477, [1, 2, 1, 2]),
        ("dataflowJob", 383281349, 383281349, [1, 2, 1, 4]),
        ("orderSyncJob", -852485132, 852485132, [0, 2, 0, 2]),
        ("demoJob", 1551644378, 1551644378, [0, 2, 2, 3]),
        ("job-a", 101295697, 101295697, [1, 1, 1, 2]),
        ("\u{4EFB}\u{52A1}", 647942, 647942, [0, 2, 2, 2]),
        ("polygenelubricants", i32::MIN, i32::MIN, [0, -2, 0, -3]),
    ];

    #[test]
    fn hash_abs_and_remainders_match_the_jdk() {
        for &(name, hash, abs_hash, rems) in TABLE {
            assert_eq!(string_hash(name), hash, "hashCode of {name:?}");
            assert_eq!(abs(hash), abs_hash, "Math.abs of {name:?}");
            for (n, want) in (2..=5).zip(rems) {
                assert_eq!(abs_hash % n, want, "abs(hash({name:?})) % {n}");
            }
        }
    }

    #[test]
    fn parity_column_matches_the_reference() {
        // §5.1 parity column: Java `h % 2 == 0` is "even", including MIN_VALUE and negatives.
        let even = [
            "",
            "0",
            "2",
            "abc",
            "test_job",
            "JobName",
            "orderSyncJob",
            "demoJob",
        ];
        let odd = [
            "1",
            "3",
            "a",
            "ab",
            "myJob",
            "javaSimpleJob",
            "SimpleJob",
            "dataflowJob",
        ];
        for name in even {
            assert_eq!(string_hash(name) % 2, 0, "{name:?} is even");
        }
        for name in odd {
            assert_ne!(string_hash(name) % 2, 0, "{name:?} is odd");
        }
        assert_eq!(string_hash("javaSimpleJob") % 2, -1);
        assert_eq!(string_hash("polygenelubricants") % 2, 0);
    }

    #[test]
    fn supplementary_characters_count_as_two_code_units() {
        // U+1F600 is the surrogate pair D83D DE00 in UTF-16: 31 * 0xD83D + 0xDE00.
        assert_eq!(string_hash("\u{1F600}"), 31 * 0xD83D + 0xDE00);
    }
}
