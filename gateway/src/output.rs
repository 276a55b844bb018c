//! Output for people (aligned tables) and machines (CSV, JSON).

use std::io::Write;

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Csv,
    Json,
}

/// Rows of text cells under a header, rendered as a table or CSV.
#[derive(Debug, Default)]
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
    /// Columns aligned to the right (amounts, counts).
    pub numeric: Vec<bool>,
}

impl Table {
    pub fn new(headers: &[&'static str], numeric: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
            numeric: headers.iter().map(|h| numeric.contains(h)).collect(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.headers.len());
        self.rows.push(row);
    }

    pub fn write_table(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<&str>, out: &mut dyn Write| -> std::io::Result<()> {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                let pad = widths[i] - cell.chars().count();
                if self.numeric[i] {
                    text.push_str(&" ".repeat(pad));
                    text.push_str(cell);
                } else {
                    text.push_str(cell);
                    if i + 1 < cells.len() {
                        text.push_str(&" ".repeat(pad));
                    }
                }
            }
            writeln!(out, "{}", text.trim_end())
        };
        let header: Vec<String> = self.headers.iter().map(|h| h.to_uppercase()).collect();
        line(header.iter().map(String::as_str).collect(), out)?;
        for row in &self.rows {
            line(row.iter().map(String::as_str).collect(), out)?;
        }
        Ok(())
    }

    pub fn write_csv(&self, out: &mut impl Write) -> std::io::Result<()> {
        write_csv_line(out, &self.headers)?;
        for row in &self.rows {
            write_csv_line(out, row)?;
        }
        Ok(())
    }
}

/// One CSV line of `cells`, quoted as [`csv_cell`] does.
pub fn write_csv_line<S: AsRef<str>>(out: &mut impl Write, cells: &[S]) -> std::io::Result<()> {
    let line: Vec<String> = cells.iter().map(|c| csv_cell(c.as_ref())).collect();
    writeln!(out, "{}", line.join(","))
}

/// RFC 4180 quoting: cells with a comma, quote or newline are quoted, quotes doubled.
pub fn csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

/// Rows a paged listing (jobs, the audit log) gives when no limit is asked for.
pub const PAGE_LIMIT: u32 = 1000;

/// The most rows one page of a listing may ask for.
pub const PAGE_LIMIT_MOST: u32 = 10_000;

/// The page size for `asked`: [`PAGE_LIMIT`] when not given; refused outside
/// 1..=[`PAGE_LIMIT_MOST`], with the message to answer.
pub fn page_limit(asked: Option<u32>) -> Result<u32, String> {
    let limit = asked.unwrap_or(PAGE_LIMIT);
    if (1..=PAGE_LIMIT_MOST).contains(&limit) {
        Ok(limit)
    } else {
        Err(format!("limit must be 1 to {PAGE_LIMIT_MOST}, not {limit}"))
    }
}

/// Writes `value` as pretty JSON followed by a newline.
pub fn write_json(out: &mut impl Write, value: &serde_json::Value) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_csv_quotes() {
        let mut t = Table::new(&["account", "amount"], &["amount"]);
        t.push(vec!["physics".into(), "1.50".into()]);
        t.push(vec!["a,b".into(), "12.00".into()]);
        let mut text = Vec::new();
        t.write_table(&mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "ACCOUNT  AMOUNT\nphysics    1.50\na,b       12.00\n"
        );
        let mut csv = Vec::new();
        t.write_csv(&mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "account,amount\nphysics,1.50\n\"a,b\",12.00\n"
        );
    }
}
