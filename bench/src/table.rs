//! Tables, printed as Markdown so they paste into `docs/benchmarks.md` as they are.

/// A table with a title and a header row.
pub struct Table {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: &str, header: &[&str]) -> Self {
        Self {
            title: title.to_owned(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as Markdown, columns padded for the terminal.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![3; cols];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate().take(cols) {
                width[i] = width[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = (0..cols)
                .map(|i| {
                    let cell = cells.get(i).map(String::as_str).unwrap_or("");
                    format!("{cell:<w$}", w = width[i])
                })
                .collect();
            format!("| {} |", padded.join(" | "))
        };
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        let mut out = format!("\n### {}\n\n{}\n", self.title, line(&self.header));
        out.push_str(&format!("|-{}-|\n", rule.join("-|-")));
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    pub fn print(&self) {
        println!("{}", self.render());
    }
}

/// A ratio with two decimals (`n/a` when undefined).
pub fn ratio_cell(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.2}")
    } else {
        "n/a".into()
    }
}

/// A met / missed verdict for a target.
pub fn verdict(met: bool) -> String {
    if met { "met" } else { "MISSED" }.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_markdown() {
        let mut t = Table::new("T", &["a", "bb"]);
        t.row(vec!["1".into(), "22222".into()]);
        let out = t.render();
        assert!(out.contains("| a   | bb    |"), "{out}");
        assert!(out.contains("| 1   | 22222 |"), "{out}");
        assert!(out.contains("|-----|-------|"), "{out}");
    }
}
