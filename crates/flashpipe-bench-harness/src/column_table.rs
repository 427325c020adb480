//! A report table described by its columns: each column says its header, least width,
//! alignment and how its cell is formatted from one row, so a header and its value sit on
//! one line and every row has one cell per column by construction. It prints through
//! [`Table`], so the text is the same as a table built column by column.

use crate::table::{Align, Table};

/// Formats one cell from a row.
type Cell<'a, R> = Box<dyn Fn(&R) -> String + 'a>;

/// Columns over a fixed list of rows; [`ColumnTable::table`] fills a [`Table`] with them.
pub struct ColumnTable<'a, R> {
    table: Table,
    rows: Vec<&'a R>,
    cells: Vec<Cell<'a, R>>,
}

impl<'a, R> ColumnTable<'a, R> {
    /// A table over `rows` whose columns are separated by `gap`.
    pub fn new(gap: &str, rows: impl IntoIterator<Item = &'a R>) -> Self {
        ColumnTable {
            table: Table::new(gap),
            rows: rows.into_iter().collect(),
            cells: Vec::new(),
        }
    }

    /// Adds a left-aligned column at least `width` characters wide.
    pub fn left(self, header: &str, width: usize, cell: impl Fn(&R) -> String + 'a) -> Self {
        self.column(header, width, Align::Left, cell)
    }

    /// Adds a right-aligned column at least `width` characters wide.
    pub fn right(self, header: &str, width: usize, cell: impl Fn(&R) -> String + 'a) -> Self {
        self.column(header, width, Align::Right, cell)
    }

    /// Adds a column at least `width` characters wide (wider cells are not cut).
    pub fn column(
        mut self,
        header: &str,
        width: usize,
        align: Align,
        cell: impl Fn(&R) -> String + 'a,
    ) -> Self {
        self.table = self.table.column(header, width, align);
        self.cells.push(Box::new(cell));
        self
    }

    /// Adds a column with `gap` printed before it instead of the table's gap.
    pub fn column_after(
        mut self,
        gap: &str,
        header: &str,
        width: usize,
        align: Align,
        cell: impl Fn(&R) -> String + 'a,
    ) -> Self {
        self.table = self.table.column_after(gap, header, width, align);
        self.cells.push(Box::new(cell));
        self
    }

    /// Adds a right-aligned column with `gap` printed before it instead of the table's gap
    /// (the first column of a group, such as one after a ` | `).
    pub fn right_after(
        self,
        gap: &str,
        header: &str,
        width: usize,
        cell: impl Fn(&R) -> String + 'a,
    ) -> Self {
        self.column_after(gap, header, width, Align::Right, cell)
    }

    /// Starts every line with `indent` (see [`Table::indent`]).
    pub fn indent(mut self, indent: &str) -> Self {
        self.table = self.table.indent(indent);
        self
    }

    /// Prints `line` instead of the columns' headers (see [`Table::caption`]).
    pub fn caption(mut self, line: &str) -> Self {
        self.table = self.table.caption(line);
        self
    }

    /// The table with one row per row given, each cell formatted by its column.
    pub fn table(self) -> Table {
        let mut table = self.table;
        for row in self.rows {
            table.row(self.cells.iter().map(|cell| cell(row)).collect());
        }
        table
    }

    /// Prints [`ColumnTable::table`] on standard output.
    pub fn print(self) {
        self.table().print();
    }
}

/// `value` with `decimals` digits after the point, the cell most report columns print.
pub fn fixed(value: f64, decimals: usize) -> String {
    format!("{value:.decimals$}")
}

/// [`fixed`] for a figure that may be missing: `absent` (such as `-` or `n/a`) when it is.
pub fn fixed_or(value: Option<f64>, decimals: usize, absent: &str) -> String {
    value.map_or_else(|| absent.to_string(), |value| fixed(value, decimals))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row {
        name: &'static str,
        value: f64,
    }

    #[test]
    fn each_column_formats_its_cell_from_the_row() {
        let rows = [
            Row {
                name: "a",
                value: 1.5,
            },
            Row {
                name: "longer-name",
                value: 12.25,
            },
        ];
        let table = ColumnTable::new("  ", &rows)
            .left("name", 6, |row| row.name.to_string())
            .right("value", 6, |row| fixed(row.value, 2))
            .indent(" ")
            .table();
        assert_eq!(
            table.render(),
            " name     value\n a         1.50\n longer-name   12.25\n"
        );
    }

    #[test]
    fn a_group_column_prints_its_own_gap_and_a_missing_figure_its_placeholder() {
        let rows = [(Some(1.0), None), (None, Some(2.0))];
        let table = ColumnTable::new(" ", &rows)
            .right("a", 4, |row: &(Option<f64>, Option<f64>)| {
                fixed_or(row.0, 1, "-")
            })
            .right_after(" | ", "b", 4, |row| fixed_or(row.1, 2, "n/a"))
            .table();
        assert_eq!(table.render(), "   a |    b\n 1.0 |  n/a\n   - | 2.00\n");
    }
}
