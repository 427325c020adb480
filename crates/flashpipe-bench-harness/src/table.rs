//! The one text-table formatter of every report: columns of a fixed least width, left- or
//! right-aligned, each with the gap printed before it; cells are formatted by the caller,
//! so a table prints the same characters as the `format!` widths it replaced.

/// How a cell sits in its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right.
    Left,
    /// Padded on the left.
    Right,
}

/// One column: its header, its least width in characters, its alignment and the text
/// printed before it (nothing before the first column).
#[derive(Debug, Clone)]
struct Column {
    header: String,
    width: usize,
    align: Align,
    gap: String,
}

/// A table being built: columns first, then rows; [`Table::render`] gives the text.
#[derive(Debug, Clone)]
pub struct Table {
    caption: Option<String>,
    indent: String,
    default_gap: String,
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table whose columns are separated by `gap` unless told otherwise.
    pub fn new(gap: &str) -> Table {
        Table {
            caption: None,
            indent: String::new(),
            default_gap: gap.to_string(),
            columns: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Prints `line` as the header line instead of the columns' headers (for a header
    /// that carries more than the column names, such as the run's parameters).
    pub fn caption(mut self, line: &str) -> Table {
        self.caption = Some(line.to_string());
        self
    }

    /// Starts every line (the header's too, not a caption) with `indent`.
    pub fn indent(mut self, indent: &str) -> Table {
        self.indent = indent.to_string();
        self
    }

    /// Adds a left-aligned column at least `width` characters wide.
    pub fn left(self, header: &str, width: usize) -> Table {
        self.column(header, width, Align::Left)
    }

    /// Adds a right-aligned column at least `width` characters wide.
    pub fn right(self, header: &str, width: usize) -> Table {
        self.column(header, width, Align::Right)
    }

    /// Adds a column at least `width` characters wide (wider cells are not cut).
    pub fn column(self, header: &str, width: usize, align: Align) -> Table {
        let gap = self.default_gap.clone();
        self.column_after(&gap, header, width, align)
    }

    /// Adds a column with `gap` printed before it instead of the table's gap.
    pub fn column_after(mut self, gap: &str, header: &str, width: usize, align: Align) -> Table {
        let gap = match self.columns.is_empty() {
            true => String::new(),
            false => gap.to_string(),
        };
        self.columns.push(Column {
            header: header.to_string(),
            width,
            align,
            gap,
        });
        self
    }

    /// Adds a row: one cell per column, already formatted.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.columns.len(),
            "a table row has one cell per column"
        );
        self.rows.push(cells);
    }

    /// The header line and every row, each ending in a newline.
    pub fn render(&self) -> String {
        let mut text = match &self.caption {
            Some(caption) => format!("{caption}\n"),
            None => {
                let headers: Vec<&str> = self.columns.iter().map(|c| c.header.as_str()).collect();
                self.line(&headers)
            }
        };
        for row in &self.rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            text.push_str(&self.line(&cells));
        }
        text
    }

    /// Prints [`Table::render`] on standard output; a closed pipe ends it quietly.
    pub fn print(&self) {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(self.render().as_bytes());
    }

    fn line(&self, cells: &[&str]) -> String {
        let mut line = self.indent.clone();
        for (column, cell) in self.columns.iter().zip(cells) {
            line.push_str(&column.gap);
            let padded = match column.align {
                Align::Left => format!("{cell:<width$}", width = column.width),
                Align::Right => format!("{cell:>width$}", width = column.width),
            };
            line.push_str(&padded);
        }
        line.push('\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_padded_to_the_column_width_and_joined_by_the_gaps() {
        let mut table = Table::new("  ")
            .column("name", 6, Align::Left)
            .column("count", 3, Align::Right)
            .column_after(" ", "unit", 0, Align::Left);
        table.row(vec!["a".into(), "7".into(), "us".into()]);
        table.row(vec!["longer-name".into(), "1234".into(), String::new()]);
        assert_eq!(
            table.render(),
            "name    count unit\na         7 us\nlonger-name  1234 \n"
        );
    }

    #[test]
    fn a_caption_replaces_the_header_line() {
        let mut table = Table::new(" ").caption("n (seed 3)").right("n", 3);
        table.row(vec!["12".into()]);
        assert_eq!(table.render(), "n (seed 3)\n 12\n");
    }
}
