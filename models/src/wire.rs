//! Enums whose wire form is fixed: the API, the read tables, the search attributes and the
//! events all spell a value the same way; and a value's form in a URL.

/// Why a string could not be read as one of this module's enums.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} `{value}`")]
pub struct UnknownVariant {
    pub(crate) what: &'static str,
    pub(crate) value: String,
}

/// Declares a string-backed enum whose wire form is fixed, so the API, the read tables, the
/// search attributes and the events all spell a value the same way.
///
/// Not `strum`: its derives would give `Display`, `FromStr` and the list of values, but each
/// variant would then carry its wire name twice (serde's `rename` and strum's `serialize`, as
/// the names follow no one case), and the OpenAPI schema and the error that names the enum
/// would still be written here. One name per variant, given once, is what this macro is for.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $wire)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value as it is written on the wire and in the read tables.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        // Written by hand: the derive does not see the `rename`s a macro expands to.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($wire),+]))
                    .build()
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::wire::UnknownVariant;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err($crate::wire::UnknownVariant { what: $what, value: s.to_owned() }),
                }
            }
        }
    };
}

pub(crate) use wire_enum;

/// RFC 3986's unreserved characters: the ones a URL carries as they are.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `s` as one URL path segment or query value: RFC 3986's unreserved characters as they are,
/// every other byte percent-encoded (so `../x` or `a&b` cannot reach another path or
/// parameter).
pub fn percent_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn a_value_in_a_url_cannot_reach_another_path_or_parameter() {
        assert_eq!(percent_encode("01a2-ff_x.y~"), "01a2-ff_x.y~");
        assert_eq!(percent_encode("../x"), "..%2Fx");
        assert_eq!(percent_encode("a b&c=d"), "a%20b%26c%3Dd");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }
}

/// `text` cut to at most `max` bytes at a character's end, `…` added when cut: a reason
/// quoted from a tool's output (which can run to pages) fits a row and an event.
pub fn truncated(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod truncation_tests {
    #[test]
    fn long_text_is_cut_at_a_character() {
        assert_eq!(super::truncated("short", 10), "short");
        assert_eq!(super::truncated("ééé", 3), "é…", "never inside a character");
    }
}
