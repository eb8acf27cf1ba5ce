//! How the CLI prints: tables for people, the API's JSON or YAML for scripts.

use serde_json::Value;

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns (lists) or `field: value` lines (one resource).
    Table,
    /// The API's JSON, pretty-printed.
    Json,
    /// The same, as YAML.
    Yaml,
}

/// A table column: its header and the JSON pointer of its value in each item.
pub type Column = (&'static str, &'static str);

/// `value` in `format`; `table` renders it for people.
pub fn render(format: Format, value: &Value, table: impl FnOnce(&Value) -> String) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(value).unwrap_or_default() + "\n",
        Format::Yaml => yaml_serde::to_string(value).unwrap_or_default(),
        Format::Table => table(value),
    }
}

/// A cell: text as is, nothing as `-`, a list of texts joined, anything else as compact JSON.
pub fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

/// The page's `items` under `columns`, aligned; with a hint for the next page.
pub fn list(page: &Value, columns: &[Column]) -> String {
    let items = page["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, p)| cell(item.pointer(p))).collect())
        .collect();
    let mut out = aligned(columns.iter().map(|(h, _)| h.to_string()).collect(), &rows);
    if let Some(cursor) = page["nextCursor"].as_str() {
        out.push_str(&format!("(more: --cursor {cursor})\n"));
    }
    out
}

/// Rows under a header, each column as wide as its widest cell.
pub fn aligned(header: Vec<String>, rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(&header);
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// One resource as `field: value` lines, in the API's order.
pub fn fields(value: &Value) -> String {
    let Some(object) = value.as_object() else {
        return cell(Some(value)) + "\n";
    };
    let width = object.keys().map(String::len).max().unwrap_or(0);
    object
        .iter()
        .map(|(k, v)| format!("{k:<width$}  {}\n", cell(Some(v))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_is_aligned_under_its_header_with_the_next_page_named() {
        let page = json!({"items": [
            {"id": "a", "state": "Applied", "tags": ["x", "y"]},
            {"id": "bbbb", "state": null}
        ], "nextCursor": "c2"});
        let out = list(
            &page,
            &[("ID", "/id"), ("STATE", "/state"), ("TAGS", "/tags")],
        );
        assert_eq!(
            out,
            "ID    STATE    TAGS\na     Applied  x,y\nbbbb  -        -\n(more: --cursor c2)\n"
        );
    }

    #[test]
    fn json_and_yaml_are_the_api_fields() {
        let v = json!({"provisioningRunId": "r1", "state": "Applied"});
        let back: Value = serde_json::from_str(&render(Format::Json, &v, fields)).unwrap();
        assert_eq!(back, v);
        let back: Value = yaml_serde::from_str(&render(Format::Yaml, &v, fields)).unwrap();
        assert_eq!(back, v);
        assert_eq!(
            render(Format::Table, &v, fields),
            "provisioningRunId  r1\nstate              Applied\n"
        );
    }
}
