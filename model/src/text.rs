//! Closed sets of words as enums: one macro declares the variants with their wire text, and
//! gives `as_str`, `parse`, `Display`, `FromStr`, serde, and `TryFrom<String>` (what core's
//! store reads TEXT columns with).

use std::fmt;

/// A word that is not one of an enum's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownText {
    /// What the enum is, e.g. "connection status".
    pub what: &'static str,
    pub text: String,
}

impl fmt::Display for UnknownText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:?}", self.what, self.text)
    }
}

impl std::error::Error for UnknownText {}

/// Declares an enum whose values are words: serialized as the word, parsed from it.
macro_rules! text_enum {
    ($(#[$meta:meta])* pub enum $name:ident ($what:literal) { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The word on the wire and in the database.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value this word names, if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::text::UnknownText;
            fn from_str(s: &str) -> Result<Self, $crate::text::UnknownText> {
                $name::parse(s).ok_or_else(|| $crate::text::UnknownText { what: $what, text: s.to_owned() })
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::text::UnknownText;
            fn try_from(s: String) -> Result<Self, $crate::text::UnknownText> {
                s.parse()
            }
        }
    };
}
