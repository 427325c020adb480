//! Every `--plot` writes its PNG or fails with a non-zero exit: the reproductions that
//! are tables (RAD Table II) and the FTL speed run draw their numbers, `repro all` draws
//! a grid of panels, and an unwritable path is an error naming the file.

mod common;

use std::path::Path;

use common::{check_fails, command_line, fresh_folder, succeed, text};

fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    assert_eq!(&bytes[1..4], b"PNG", "{} is not a PNG", path.display());
}

#[test]
fn reproductions_that_are_tables_draw_their_numbers() {
    let folder = fresh_folder("plot-repro");
    for which in ["rad-table2", "minflash-table1", "minflash-fig7"] {
        let png = folder.join(format!("{which}.png"));
        succeed(&["sim", "repro", which, "--plot", text(&png)]);
        check_png(&png);
    }
}

#[test]
fn ftl_speed_draws_its_chart() {
    let folder = fresh_folder("plot-ftl-speed");
    let png = folder.join("speed.png");
    succeed(&command_line(
        "ftl speed --blocks-per-chip 8 --pages-per-block 8 --device-writes 1 --plot {}",
        &[text(&png)],
    ));
    check_png(&png);
}

#[test]
fn a_plot_that_cannot_be_written_fails() {
    let folder = fresh_folder("plot-unwritable");
    let png = folder.join("no-such-folder").join("chart.png");
    check_fails(
        &["sim", "repro", "minflash-fig7", "--plot", text(&png)],
        "no-such-folder does not exist",
    );
    check_fails(
        &["sim", "repro", "minflash-fig7", "--plot", "chart.svg"],
        "ending in .png",
    );
    check_fails(
        &["ftl", "wa", "--plot", text(&png)],
        "no-such-folder does not exist",
    );
}
