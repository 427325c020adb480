//! The panel file `flashpipe bench chart` reads: a chart told in tab-separated lines, so a
//! shell script can write one with `printf` and no plotting library.
//!
//! ```text
//! title<TAB>Throughput over time (run phase)
//! x_label<TAB>time (s)
//! y_label<TAB>updates per second
//! kind<TAB>lines
//! series<TAB>x<TAB>y
//! ext4-nbd<TAB>5<TAB>911.0
//! ```
//!
//! The header lines (`title`, `x_label`, `y_label` required, `kind` `lines` or `bars`,
//! `lines` when absent) come first, each once; the line `series x y` ends them; then one
//! row a point. In a line chart x is a number; in a bar chart x names a category (in
//! order of first appearance) and each series has one bar in it. Blank lines are
//! skipped. Every limit below is checked, and a file past one is refused with its line.

use crate::error::{invalid_input, io_with, BenchError};
use crate::plot::{Chart, ChartKind, Series};
use std::io::Read;

/// The largest panel file read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Series in one panel (each its own colour of the palette).
pub const MAX_SERIES: usize = 6;
/// Points in one panel, all series together.
pub const MAX_POINTS: usize = 10_000;
/// Categories of one bar chart.
pub const MAX_CATEGORIES: usize = 12;
/// Characters of a title, a label, a series' or a category's name.
pub const MAX_TEXT_CHARS: usize = 100;

/// The line that ends the header.
const COLUMNS_LINE: &str = "series\tx\ty";

/// Reads and checks the panel file at `path`.
pub fn read_panel(path: &str) -> Result<Chart, BenchError> {
    let file =
        std::fs::File::open(path).map_err(io_with(format!("cannot open the panel {path}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_with(format!("cannot read the panel {path}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(invalid_input(format!(
            "the panel {path} is larger than {MAX_FILE_BYTES} bytes: give at most {MAX_POINTS} points"
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| invalid_input(format!("the panel {path} is not UTF-8 text")))?;
    parse_panel(&text).map_err(|error| error.prefixed(format!("the panel {path}")))
}

/// The header's fields, each given at most once.
#[derive(Default)]
struct Header {
    title: Option<String>,
    x_label: Option<String>,
    y_label: Option<String>,
    bars: Option<bool>,
}

/// The rows read so far: series and categories in order of first appearance.
#[derive(Default)]
struct Rows {
    series: Vec<Series>,
    categories: Vec<String>,
    points: usize,
}

/// Parses a panel's text (see the module's documentation).
pub fn parse_panel(text: &str) -> Result<Chart, BenchError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim_end_matches('\r')))
        .filter(|(_, line)| !line.trim().is_empty());
    let header = read_header(&mut lines)?;
    let bars = header.bars.unwrap_or(false);
    let mut rows = Rows::default();
    for (number, line) in lines {
        add_row(&mut rows, line, bars).map_err(|error| error.prefixed(format!("line {number}")))?;
    }
    if rows.points == 0 {
        return Err(invalid_input(format!(
            "no rows after the `{}` line: give one `series x y` row a point",
            COLUMNS_LINE.replace('\t', " ")
        )));
    }
    let missing = |name: &str| {
        invalid_input(format!(
            "no `{name}` line: begin the file with title, x_label and y_label lines"
        ))
    };
    let kind = if bars {
        ChartKind::GroupedBars {
            categories: rows.categories,
        }
    } else {
        rows.series.iter_mut().for_each(|line| {
            line.points
                .sort_by(|left, right| left.0.total_cmp(&right.0));
        });
        ChartKind::Lines
    };
    Ok(Chart {
        title: header.title.ok_or_else(|| missing("title"))?,
        x_label: header.x_label.ok_or_else(|| missing("x_label"))?,
        y_label: header.y_label.ok_or_else(|| missing("y_label"))?,
        kind,
        series: rows.series,
        reference_points: Vec::new(),
        reference_name: String::new(),
    })
}

/// Reads header lines up to and including the `series x y` line.
fn read_header<'a>(
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
) -> Result<Header, BenchError> {
    let mut header = Header::default();
    for (number, line) in lines {
        if line == COLUMNS_LINE {
            return Ok(header);
        }
        set_field(&mut header, line).map_err(|error| error.prefixed(format!("line {number}")))?;
    }
    Err(invalid_input(
        "no `series x y` line (tab-separated) ends the header: write it before the rows",
    ))
}

fn set_field(header: &mut Header, line: &str) -> Result<(), BenchError> {
    let (key, value) = line.split_once('\t').ok_or_else(|| {
        invalid_input("a header line is a name, a tab and a value (title, x_label, y_label, kind)")
    })?;
    let value = checked_text(value, key)?;
    let slot_taken = match key {
        "title" => header.title.replace(value).is_some(),
        "x_label" => header.x_label.replace(value).is_some(),
        "y_label" => header.y_label.replace(value).is_some(),
        "kind" => header.bars.replace(bar_kind(&value)?).is_some(),
        _ => {
            return Err(invalid_input(format!(
                "`{key}` is not a header name: title, x_label, y_label or kind"
            )))
        }
    };
    if slot_taken {
        return Err(invalid_input(format!("`{key}` is given twice")));
    }
    Ok(())
}

fn bar_kind(value: &str) -> Result<bool, BenchError> {
    match value {
        "lines" => Ok(false),
        "bars" => Ok(true),
        _ => Err(invalid_input(format!(
            "the kind `{value}` is neither `lines` nor `bars`"
        ))),
    }
}

/// `value` as a name or label: not empty, at most [`MAX_TEXT_CHARS`] characters.
fn checked_text(value: &str, what: &str) -> Result<String, BenchError> {
    if value.trim().is_empty() {
        return Err(invalid_input(format!("the {what} is empty")));
    }
    if value.chars().count() > MAX_TEXT_CHARS {
        return Err(invalid_input(format!(
            "the {what} is longer than {MAX_TEXT_CHARS} characters"
        )));
    }
    Ok(value.to_string())
}

/// A finite number, or a refusal naming the column.
fn number(value: &str, column: &str) -> Result<f64, BenchError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|parsed| parsed.is_finite())
        .ok_or_else(|| invalid_input(format!("the {column} `{value}` is not a finite number")))
}

fn add_row(rows: &mut Rows, line: &str, bars: bool) -> Result<(), BenchError> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [name, x, y] = fields[..] else {
        return Err(invalid_input(format!(
            "a row is three tab-separated fields (series, x, y), not {}",
            fields.len()
        )));
    };
    let name = checked_text(name, "series name")?;
    let y = number(y, "y")?;
    let x = if bars {
        category_index(rows, x)?
    } else {
        number(x, "x")?
    };
    if rows.points == MAX_POINTS {
        return Err(invalid_input(format!(
            "more than {MAX_POINTS} points in one panel"
        )));
    }
    let series = series_named(rows, name)?;
    if bars && series.points.iter().any(|point| point.0 == x) {
        return Err(invalid_input(format!(
            "the series `{}` has a second bar in the same category",
            series.name
        )));
    }
    series.points.push((x, y));
    rows.points += 1;
    Ok(())
}

/// The index of the category named `name`, added if new.
fn category_index(rows: &mut Rows, name: &str) -> Result<f64, BenchError> {
    if let Some(index) = rows.categories.iter().position(|known| known == name) {
        return Ok(index as f64);
    }
    if rows.categories.len() == MAX_CATEGORIES {
        return Err(invalid_input(format!(
            "more than {MAX_CATEGORIES} categories in one bar chart"
        )));
    }
    rows.categories.push(checked_text(name, "category")?);
    Ok((rows.categories.len() - 1) as f64)
}

/// The series named `name`, added if new.
fn series_named(rows: &mut Rows, name: String) -> Result<&mut Series, BenchError> {
    let index = match rows.series.iter().position(|known| known.name == name) {
        Some(index) => index,
        None if rows.series.len() == MAX_SERIES => {
            return Err(invalid_input(format!(
                "more than {MAX_SERIES} series in one panel"
            )))
        }
        None => {
            rows.series.push(Series::new(name, []));
            rows.series.len() - 1
        }
    };
    Ok(&mut rows.series[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "title\tThroughput\nx_label\ttime (s)\ny_label\tops/s\nseries\tx\ty\n";

    fn refusal(text: &str) -> String {
        parse_panel(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_a_line_chart_in_x_order() {
        let chart = parse_panel(&format!("{HEADER}a\t10\t2\n\na\t5\t1\nb\t5\t3\n")).unwrap();
        assert_eq!(chart.title, "Throughput");
        assert_eq!(chart.kind, ChartKind::Lines);
        assert_eq!(chart.series.len(), 2);
        assert_eq!(chart.series[0].points, vec![(5.0, 1.0), (10.0, 2.0)]);
    }

    #[test]
    fn reads_a_bar_chart_with_categories_in_order() {
        let text = "kind\tbars\ntitle\tRate\nx_label\tphase\ny_label\tops/s\nseries\tx\ty\n\
                    ext4\trun\t900\nfs\trun\t400\next4\tload\t500\n";
        let chart = parse_panel(text).unwrap();
        let categories = ["run", "load"].map(String::from).to_vec();
        assert_eq!(chart.kind, ChartKind::GroupedBars { categories });
        assert_eq!(chart.series[0].points, vec![(0.0, 900.0), (1.0, 500.0)]);
    }

    #[test]
    fn refuses_bad_numbers_with_their_line() {
        for bad in ["abc", "NaN", "inf", ""] {
            let error = refusal(&format!("{HEADER}a\t1\t{bad}\n"));
            assert!(
                error.contains("line 5") && error.contains("not a finite number"),
                "{error}"
            );
        }
        assert!(refusal(&format!("{HEADER}a\tx\t1\n")).contains("the x `x`"));
    }

    #[test]
    fn refuses_a_header_that_is_incomplete_or_wrong() {
        assert!(refusal("title\tT\nseries\tx\ty\na\t1\t1\n").contains("no `x_label` line"));
        assert!(refusal("title\tT\n").contains("ends the header"));
        assert!(refusal("colour\tred\n").contains("not a header name"));
        assert!(refusal("title\tA\ntitle\tB\n").contains("given twice"));
        assert!(refusal("kind\tpie\n").contains("neither"));
        assert!(refusal(&format!("title\t{}\n", "t".repeat(101))).contains("longer than 100"));
        assert!(refusal(HEADER).contains("no rows"));
        assert!(refusal(&format!("{HEADER}a\t1\n")).contains("three tab-separated fields"));
    }

    #[test]
    fn refuses_more_series_points_or_categories_than_its_limits() {
        let series: String = (0..=MAX_SERIES)
            .map(|index| format!("s{index}\t1\t1\n"))
            .collect();
        assert!(refusal(&format!("{HEADER}{series}")).contains("more than 6 series"));
        let points: String = (0..=MAX_POINTS)
            .map(|index| format!("a\t{index}\t1\n"))
            .collect();
        assert!(refusal(&format!("{HEADER}{points}")).contains("more than 10000 points"));
        let bars = "kind\tbars\ntitle\tT\nx_label\tx\ny_label\ty\nseries\tx\ty\n";
        let categories: String = (0..=MAX_CATEGORIES)
            .map(|index| format!("a\tc{index}\t1\n"))
            .collect();
        assert!(refusal(&format!("{bars}{categories}")).contains("more than 12 categories"));
        assert!(refusal(&format!("{bars}a\tc\t1\na\tc\t2\n")).contains("second bar"));
    }

    #[test]
    fn refuses_a_missing_large_or_binary_file() {
        let scratch = crate::scratch::Scratch::new(&std::env::temp_dir(), "chart-tsv").unwrap();
        let refusal_of = |name: &str, contents: Option<&[u8]>| {
            let path = scratch.path().join(name);
            if let Some(bytes) = contents {
                std::fs::write(&path, bytes).unwrap();
            }
            read_panel(path.to_str().unwrap()).unwrap_err().to_string()
        };
        let large = vec![b'a'; MAX_FILE_BYTES as usize + 1];
        assert!(refusal_of("missing.tsv", None).contains("cannot open the panel"));
        assert!(refusal_of("large.tsv", Some(&large)).contains("larger than"));
        assert!(refusal_of("binary.tsv", Some(&[0xff, 0xfe, 0x00])).contains("not UTF-8"));
    }
}
