//! CSV downloads of the portal (usage tables, the audit log): field quoting that no
//! spreadsheet runs as a formula, and the download response.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// A CSV field: quoted when it holds a comma, quote or line break; a leading `=`, `+`, `-` or
/// `@` is prefixed with `'` so a spreadsheet never runs it as a formula.
pub fn field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// A CSV document built line by line.
#[derive(Default)]
pub struct Csv(String);

impl Csv {
    pub fn line(&mut self, cells: &[String]) {
        self.0
            .push_str(&cells.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
        self.0.push_str("\r\n");
    }

    /// The download: `text/csv` as an attachment named `filename`.
    pub fn download(self, filename: &str) -> Response {
        let disposition = format!(
            "attachment; filename=\"{}\"",
            filename.replace(['"', '\\', '\r', '\n'], "_")
        );
        (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
                (header::CONTENT_DISPOSITION, disposition),
            ],
            self.0,
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn csv_fields_are_quoted_and_never_formulas() {
        assert_eq!(field("storage.get"), "storage.get");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(field("-1"), "'-1");
    }
}
