//! A text the admin writes, kept as a code and the values in it, so that the console can say it
//! in its own language (`web/i18n.js`) while the API and the logs get the English made here.
//! Two catalogues use it: the API's refusals (`crate::refusal`) and the messages stored with
//! fires and runs (`crate::note`).

use std::fmt;

/// One entry of a catalogue: a stable code and an English text naming its values in braces.
pub trait Kind: Copy + fmt::Debug + 'static {
    fn code(self) -> &'static str;
    fn en(self) -> &'static str;
}

/// Declares a catalogue: `Name { Variant "code" => "English with {value}", ... }`.
macro_rules! catalogue {
    ($(#[$meta:meta])* $name:ident { $($variant:ident $code:literal => $en:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stable name the API gives for it.
            pub fn code(self) -> &'static str {
                match self { $($name::$variant => $code),+ }
            }

            /// Its English text, `{name}` marking a value.
            pub fn en(self) -> &'static str {
                match self { $($name::$variant => $en),+ }
            }
        }

        impl $crate::coded::Kind for $name {
            fn code(self) -> &'static str {
                $name::code(self)
            }

            fn en(self) -> &'static str {
                $name::en(self)
            }
        }
    };
}
pub(crate) use catalogue;

/// An entry with its values; its `Display` is the English text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coded<K> {
    pub kind: K,
    pub params: Vec<(&'static str, String)>,
}

impl<K: Kind> Coded<K> {
    pub fn new(kind: K) -> Self {
        Coded {
            kind,
            params: Vec::new(),
        }
    }

    /// Gives the value `{name}` stands for.
    pub fn with(mut self, name: &'static str, value: impl fmt::Display) -> Self {
        self.params.push((name, value.to_string()));
        self
    }

    /// `{"code": ..., "params": {...}}`, as the API shows it and the store keeps it.
    pub fn to_json(&self) -> serde_json::Value {
        let params: serde_json::Map<String, serde_json::Value> = self
            .params
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(v.as_str())))
            .collect();
        serde_json::json!({ "code": self.kind.code(), "params": params })
    }
}

impl<K: Kind> From<K> for Coded<K> {
    fn from(kind: K) -> Self {
        Coded::new(kind)
    }
}

impl<K: Kind> fmt::Display for Coded<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.kind.en();
        while let Some(open) = rest.find('{') {
            let Some(len) = rest[open..].find('}') else {
                break;
            };
            f.write_str(&rest[..open])?;
            let name = &rest[open + 1..open + len];
            match self.params.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => f.write_str(v)?,
                None => f.write_str(&rest[open..=open + len])?,
            }
            rest = &rest[open + len + 1..];
        }
        f.write_str(rest)
    }
}

impl<K: Kind> std::error::Error for Coded<K> {}

#[cfg(test)]
mod tests {
    use crate::note::NoteKind;
    use crate::refusal::Reason;

    fn assert_distinct(codes: impl Iterator<Item = &'static str>) {
        let mut codes: Vec<_> = codes.collect();
        let n = codes.len();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), n, "a code is used twice");
    }

    #[test]
    fn codes_are_distinct() {
        assert_distinct(Reason::ALL.iter().map(|r| r.code()));
        assert_distinct(NoteKind::ALL.iter().map(|r| r.code()));
    }
}
