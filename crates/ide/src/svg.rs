//! A picture of a fragment layout, one cell per element, coloured by the thread
//! that owns it and labelled with that thread and the element's local (per-thread) index.
//!
//! The document is built with the `svg` crate rather than by formatting XML by hand: buffer and
//! kernel names and the layout formulas go into text and attributes, and the crate escapes both
//! (`&`, `<`, `>`, quotes) in one place. `svg` 0.18 is small, widely used, has no dependencies of
//! its own, and builds on our toolchain (Rust 1.95); its `Text` element puts content on lines of
//! its own, so labels are built with [`text`] instead.
//!
//! Drawing depends only on the layout types (the database only gathers an instance's pictures), and
//! writes nothing: `tilec
//! layout --svg` writes the pictures to files, the language server sends them to the editor.

use std::fmt::Write as _;

// `::svg` is the crate; this module is also named `svg`.
use ::svg::node::Text as TextNode;
use ::svg::node::element::{
    Definitions, Element, Group, Line, Path as SvgPath, Pattern, Rectangle, Style, Title,
};
use ::svg::{Document, Node};
use tilec_db::{Db, Instance, kernel_world, layouts, resources};
use tilec_ir::ExprArena;
use tilec_passes::layout::FragmentLayout;

/// The most rows and columns drawn: a 128×128 accumulator is 16 384 labelled cells, too many to
/// read and megabytes of SVG; its top-left 64×64 already shows every periodic pattern of a warp.
pub const MAX_ROWS: i64 = 64;
pub const MAX_COLUMNS: i64 = 64;

/// Owners listed in full in a cell (`T0,T32,T64,T96`); three or more consecutive owners are shown
/// as a range (`T0..T255`, a fully replicated reduction result), and more scattered ones as
/// `T0+9 more` (the tooltip lists them).
const LISTED_OWNERS: usize = 4;
/// Owners listed in a cell's tooltip, which browsers show on hover.
const TOOLTIP_OWNERS: usize = 16;
/// 1-D fragments longer than this are drawn as rows of this many elements.
const WRAP: i64 = 16;
/// Thick grid lines every this many rows and columns: tensor-core and vectorised layouts repeat
/// with periods that are multiples of 8, so the lines make the pattern's tiles countable.
const GRID_PERIOD: i64 = 8;
/// [`GRID_PERIOD`] as a step of a range; the constant is small and positive.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
const GRID_STEP: usize = GRID_PERIOD as usize;

/// Geometry, in SVG user units (pixels at 100%). Text is monospace, whose advance is about 0.6 em,
/// so widths are estimated from character counts without a font engine.
const CHAR_WIDTH: f64 = 0.6;
const LABEL_FONT: f64 = 12.0;
const LOCAL_FONT: f64 = 9.0;
const AXIS_FONT: f64 = 9.0;
const HEADER_FONT: f64 = 13.0;
const TITLE_FONT: f64 = 16.0;
const MIN_CELL_WIDTH: f64 = 40.0;
const CELL_HEIGHT: f64 = 32.0;
const MARGIN: f64 = 12.0;
const LINE_GAP: f64 = 1.45;

/// One fragment of one kernel instance, with what the picture's header says about it.
#[derive(Clone, Copy, Debug)]
pub struct Picture<'a> {
    pub kernel: &'a str,
    pub instance: u32,
    pub buffer: &'a str,
    /// Registers per thread, as the resource estimate counts them (None when it has no entry).
    pub registers: Option<u64>,
    pub layout: &'a FragmentLayout,
    /// The arena that owns the layout's formulas.
    pub arena: &'a ExprArena,
}

impl<'db> Picture<'db> {
    /// The picture of every fragment of an instance, in buffer order.
    pub fn of_instance(db: &'db dyn Db, instance: Instance<'db>) -> Vec<Picture<'db>> {
        let world = kernel_world(db, instance);
        let layouts = layouts(db, instance);
        let resources = resources(db, instance);
        layouts
            .buffers
            .iter()
            .map(|(&buffer, inferred)| Picture {
                kernel: instance.kernel(db).name(db),
                instance: instance.index(db),
                buffer: world.name(buffer),
                registers: resources
                    .fragment_registers
                    .get(&world.storage_of(buffer))
                    .copied(),
                layout: &inferred.layout,
                arena: &layouts.exprs,
            })
            .collect()
    }
}

impl Picture<'_> {
    /// `<kernel>-<instance>-<buffer>.svg`, with anything but letters, digits, `_`, `-` and `.`
    /// replaced, so that a name can never reach outside the output folder.
    pub fn file_name(&self) -> String {
        let clean = |name: &str| -> String {
            name.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        format!(
            "{}-{}-{}.svg",
            clean(self.kernel),
            self.instance,
            clean(self.buffer)
        )
    }
}

/// How the fragment's logical shape is laid out as a grid: the last dimension across, every
/// leading dimension flattened (row-major) down; a scalar is one cell. A 1-D fragment longer than
/// [`WRAP`] is wrapped into rows like a hex dump, each row labelled by its first index.
#[derive(Debug)]
struct Grid<'a> {
    shape: &'a [i64],
    rows: i64,
    columns: i64,
    /// A 1-D fragment wrapped into rows of `columns` elements (the last row may be partial).
    wrapped: bool,
}

impl<'a> Grid<'a> {
    fn new(shape: &'a [i64]) -> Grid<'a> {
        if let [length] = shape
            && *length > WRAP
        {
            return Grid {
                shape,
                rows: (length + WRAP - 1) / WRAP,
                columns: WRAP,
                wrapped: true,
            };
        }
        let (leading, columns) = match shape.split_last() {
            Some((&last, leading)) => (leading, last.max(0)),
            None => (&[][..], 1),
        };
        // Saturating: a shape too large to multiply is cropped anyway.
        let rows = leading
            .iter()
            .fold(1i64, |acc, &extent| acc.saturating_mul(extent.max(0)));
        Grid {
            shape,
            rows,
            columns,
            wrapped: false,
        }
    }

    /// The number of elements of the fragment.
    fn elements(&self) -> i64 {
        if self.wrapped {
            self.shape.first().copied().unwrap_or(0)
        } else {
            self.rows.saturating_mul(self.columns)
        }
    }

    /// The logical point at grid row `row`, column `column`; None past the end of a wrapped
    /// fragment's last row.
    fn point(&self, row: i64, column: i64) -> Option<Vec<i64>> {
        if self.wrapped {
            let index = row * self.columns + column;
            return (index < self.elements()).then(|| vec![index]);
        }
        let mut point = self.leading(row);
        if !self.shape.is_empty() {
            point.push(column);
        }
        Some(point)
    }

    /// The indices of the leading dimensions of grid row `row` (unwrapped grids only).
    fn leading(&self, row: i64) -> Vec<i64> {
        let leading = self
            .shape
            .split_last()
            .map_or(&[][..], |(_, leading)| leading);
        let mut point = vec![0; leading.len()];
        let mut rest = row;
        for (slot, &extent) in point.iter_mut().zip(leading).rev() {
            let extent = extent.max(1);
            *slot = rest % extent;
            rest /= extent;
        }
        point
    }

    /// The label of grid row `row`: its index, its leading indices when several dimensions were
    /// flattened into rows, or its first element when a 1-D fragment was wrapped.
    fn row_label(&self, row: i64) -> String {
        if self.wrapped {
            return (row * self.columns).to_string();
        }
        match self.leading(row).as_slice() {
            [] | [_] => row.to_string(),
            leading => join(leading, ","),
        }
    }
}

/// What one drawn cell shows.
#[derive(Debug)]
struct Cell {
    point: Vec<i64>,
    /// Every owner, one per replica, in replica order.
    threads: Vec<i64>,
    local: Option<Vec<i64>>,
}

impl Cell {
    fn label(&self) -> String {
        match self.threads.as_slice() {
            [] => "?".to_owned(),
            run if run.len() >= 3 && run.windows(2).all(|pair| pair[1] == pair[0] + 1) => {
                format!("T{}..T{}", run[0], run[run.len() - 1])
            }
            few if few.len() <= LISTED_OWNERS => few
                .iter()
                .map(|t| format!("T{t}"))
                .collect::<Vec<_>>()
                .join(","),
            [first, rest @ ..] => format!("T{first}+{} more", rest.len()),
        }
    }

    fn local_label(&self) -> String {
        match &self.local {
            Some(local) => format!("[{}]", join(local, ",")),
            None => "[?]".to_owned(),
        }
    }

    fn tooltip(&self, buffer: &str) -> String {
        let mut text = format!("{buffer}[{}]: ", join(&self.point, ", "));
        match self.threads.as_slice() {
            [] => text.push_str("owner unknown"),
            [only] => {
                let _ = write!(text, "thread {only}");
            }
            many => {
                let listed: Vec<String> = many
                    .iter()
                    .take(TOOLTIP_OWNERS)
                    .map(i64::to_string)
                    .collect();
                let more = many.len().saturating_sub(TOOLTIP_OWNERS);
                let _ = write!(
                    text,
                    "{} threads {}{}",
                    many.len(),
                    listed.join(", "),
                    if more > 0 {
                        format!(", … ({more} more)")
                    } else {
                        String::new()
                    }
                );
            }
        }
        let _ = write!(text, ", local {}", self.local_label());
        text
    }
}

fn join(values: &[i64], separator: &str) -> String {
    values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

/// The picture's stylesheet. The page around the grid (background, title, header, axes, grid
/// lines) follows the viewer's colour scheme: `prefers-color-scheme` where the SVG is opened on its
/// own, and a `dark` or `light` class on the root element where an editor knows its theme better
/// than the browser does (the VS Code extension sets it). The cells keep their light colours and
/// dark labels in both, since a thread's colour must read the same everywhere.
const THEME_STYLE: &str = "\
text { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; fill: #111; }
.title { font-size: 16px; font-weight: bold; }
.header { font-size: 13px; }
.axis { font-size: 9px; fill: #666; }
.column { text-anchor: middle; }
.row { text-anchor: end; }
.thread { font-size: 12px; font-weight: bold; text-anchor: middle; fill: #111; }
.local { font-size: 9px; text-anchor: middle; fill: #333; }
.background { fill: #fff; }
rect.cell { stroke: #fff; stroke-width: 1; }
rect.replica { fill: url(#replicated); stroke: none; pointer-events: none; }
.period, .outline { stroke: #222; }
.period { stroke-width: 1.5; }
@media (prefers-color-scheme: dark) {
  svg:not(.light) .background { fill: #1e1e1e; }
  svg:not(.light) .title, svg:not(.light) .header { fill: #ddd; }
  svg:not(.light) .axis { fill: #999; }
  svg:not(.light) rect.cell { stroke: #1e1e1e; }
  svg:not(.light) .period, svg:not(.light) .outline { stroke: #ccc; }
}
svg.dark .background { fill: #1e1e1e; }
svg.dark .title, svg.dark .header { fill: #ddd; }
svg.dark .axis { fill: #999; }
svg.dark rect.cell { stroke: #1e1e1e; }
svg.dark .period, svg.dark .outline { stroke: #ccc; }";

/// The fill of a thread's cells. Hue walks the golden ratio, so consecutive threads (which usually
/// own neighbouring elements) get far-apart hues and no two of the first few dozen look alike;
/// lightness steps with the warp, so the same hue in another warp still reads as another warp.
/// Every lightness is high enough for black labels to stay legible.
fn thread_colour(thread: i64) -> String {
    const GOLDEN: f64 = 0.618_033_988_749_895;
    const WARP_LIGHTNESS: [u32; 4] = [79, 67, 87, 73];
    let hue = ((thread.rem_euclid(1 << 20)) as f64 * GOLDEN).fract() * 360.0;
    // `rem_euclid(4)` is in 0..4.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let warp = thread.div_euclid(32).rem_euclid(4) as usize;
    format!("hsl({hue:.0},70%,{}%)", WARP_LIGHTNESS[warp])
}

fn text_width(text: &str, font: f64) -> f64 {
    text.chars().count() as f64 * CHAR_WIDTH * font
}

/// The SVG document for one fragment: a header (names, shape, replication, registers, formulas,
/// what was cropped, how to read a cell), then the ownership grid with row and column indices.
pub fn fragment_svg(picture: &Picture<'_>) -> String {
    let layout = picture.layout;
    let arena = picture.arena;
    let grid = Grid::new(&layout.shape);
    let rows = grid.rows.min(MAX_ROWS);
    let columns = grid.columns.min(MAX_COLUMNS);
    let cells: Vec<Vec<Cell>> = (0..rows)
        .map(|row| {
            (0..columns)
                .filter_map(|column| {
                    let point = grid.point(row, column)?;
                    Some(Cell {
                        threads: layout.threads_of(arena, &point),
                        local: layout.local_of(arena, &point),
                        point,
                    })
                })
                .collect()
        })
        .collect();

    // Cells are as wide as the longest label needs, so a replicated fragment's `T0+255 more`
    // stays at the same readable size as a plain `T12`.
    let widest_label = cells
        .iter()
        .flatten()
        .map(|cell| {
            text_width(&cell.label(), LABEL_FONT).max(text_width(&cell.local_label(), LOCAL_FONT))
        })
        .fold(0.0, f64::max);
    let cell_width = (widest_label + 8.0).max(MIN_CELL_WIDTH).ceil();
    let row_label_width = (0..rows)
        .map(|row| text_width(&grid.row_label(row), AXIS_FONT))
        .fold(0.0, f64::max)
        + 8.0;

    let header = header_lines(picture, &grid, rows, columns);
    let title = format!(
        "{} — kernel {}, instance {}",
        picture.buffer, picture.kernel, picture.instance
    );
    let header_height =
        TITLE_FONT * LINE_GAP + header.len() as f64 * HEADER_FONT * LINE_GAP + MARGIN;
    // Whole pixels, so that every cell edge is a whole number too (exact in binary, short to print).
    let grid_left = (MARGIN + row_label_width).ceil();
    let grid_top = (MARGIN + header_height + AXIS_FONT * LINE_GAP).ceil();
    let grid_width = columns as f64 * cell_width;
    let grid_height = rows as f64 * CELL_HEIGHT;
    let text_extent = header
        .iter()
        .map(|line| text_width(line, HEADER_FONT))
        .fold(text_width(&title, TITLE_FONT), f64::max);
    let width = (grid_left + grid_width).max(MARGIN + text_extent) + MARGIN;
    let height = grid_top + grid_height + MARGIN;

    let style = Style::new(THEME_STYLE);
    // Replicated elements get diagonal hatching on top of their first owner's colour, so a cell
    // owned by several threads cannot be mistaken for a cell owned by that one thread.
    let hatch = Pattern::new()
        .set("id", "replicated")
        .set("width", 6)
        .set("height", 6)
        .set("patternUnits", "userSpaceOnUse")
        .set("patternTransform", "rotate(45)")
        .add(
            Line::new()
                .set("x1", 0)
                .set("y1", 0)
                .set("x2", 0)
                .set("y2", 6)
                .set("stroke", "#000")
                .set("stroke-opacity", 0.18)
                .set("stroke-width", 2),
        );
    let mut document = Document::new()
        .set("width", width.ceil())
        .set("height", height.ceil())
        .set("viewBox", (0, 0, width.ceil(), height.ceil()))
        .add(Title::new(title.clone()))
        .add(style)
        .add(Definitions::new().add(hatch))
        .add(
            Rectangle::new()
                .set("class", "background")
                .set("width", "100%")
                .set("height", "100%"),
        );

    let mut baseline = MARGIN + TITLE_FONT;
    document = document.add(text("title", MARGIN, baseline, title));
    baseline += TITLE_FONT * (LINE_GAP - 1.0) + HEADER_FONT * LINE_GAP;
    for line in header {
        document = document.add(text("header", MARGIN, baseline, line));
        baseline += HEADER_FONT * LINE_GAP;
    }

    let mut axes = Group::new().set("class", "axes");
    for column in 0..columns {
        axes = axes.add(text(
            "axis column",
            grid_left + (column as f64 + 0.5) * cell_width,
            grid_top - 3.0,
            column.to_string(),
        ));
    }
    for row in 0..rows {
        axes = axes.add(text(
            "axis row",
            grid_left - 4.0,
            grid_top + (row as f64 + 0.5) * CELL_HEIGHT + AXIS_FONT * 0.35,
            grid.row_label(row),
        ));
    }
    document = document.add(axes);

    let mut grid_group = Group::new().set("class", "grid");
    for (row, line) in cells.iter().enumerate() {
        for (column, cell) in line.iter().enumerate() {
            let x = grid_left + column as f64 * cell_width;
            let y = grid_top + row as f64 * CELL_HEIGHT;
            let fill = cell
                .threads
                .first()
                .map_or_else(|| "#ccc".to_owned(), |&t| thread_colour(t));
            let mut group = Group::new()
                .set("data-element", join(&cell.point, ","))
                .set("data-threads", join(&cell.threads, ","))
                .add(Title::new(cell.tooltip(picture.buffer)))
                .add(
                    Rectangle::new()
                        .set("class", "cell")
                        .set("x", x)
                        .set("y", y)
                        .set("width", cell_width)
                        .set("height", CELL_HEIGHT)
                        .set("fill", fill),
                );
            if cell.threads.len() > 1 {
                group = group.add(
                    Rectangle::new()
                        .set("class", "replica")
                        .set("x", x)
                        .set("y", y)
                        .set("width", cell_width)
                        .set("height", CELL_HEIGHT),
                );
            }
            let centre = x + cell_width / 2.0;
            group = group
                .add(text("thread", centre, y + 14.0, cell.label()))
                .add(text("local", centre, y + 26.0, cell.local_label()));
            grid_group = grid_group.add(group);
        }
    }
    document = document.add(grid_group);

    // Period lines, then the outline, drawn last so that they sit on top of the cells.
    let mut lines = String::new();
    for column in (GRID_PERIOD..columns).step_by(GRID_STEP) {
        let x = grid_left + column as f64 * cell_width;
        let _ = write!(lines, "M{x},{grid_top}V{} ", grid_top + grid_height);
    }
    for row in (GRID_PERIOD..rows).step_by(GRID_STEP) {
        let y = grid_top + row as f64 * CELL_HEIGHT;
        let _ = write!(lines, "M{grid_left},{y}H{} ", grid_left + grid_width);
    }
    if !lines.is_empty() {
        document = document.add(
            SvgPath::new()
                .set("class", "period")
                .set("fill", "none")
                .set("d", lines.trim_end()),
        );
    }
    if rows > 0 && columns > 0 {
        document = document.add(
            Rectangle::new()
                .set("class", "outline")
                .set("x", grid_left)
                .set("y", grid_top)
                .set("width", grid_width)
                .set("height", grid_height)
                .set("fill", "none")
                .set("stroke-width", 1.5),
        );
    }
    document.to_string()
}

/// A coordinate rounded to a hundredth of a pixel: sums of fractional sizes otherwise print as
/// `72.89999999999999`, which costs bytes in every one of thousands of cells and shows nothing.
fn px(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// A `<text>` element with its content on the same line. The crate's own `Text` element writes its
/// content between newlines, which renderers ignore but which makes the file noisy to read and to
/// search (`>T12</text>`).
fn text(class: &str, x: f64, y: f64, content: String) -> Element {
    let mut element = Element::new("text");
    element.assign("class", class);
    element.assign("x", px(x));
    element.assign("y", px(y));
    element.append(TextNode::new(content));
    element
}

/// The header below the title: shape and resources, the formulas, what part is drawn, and how to
/// read a cell.
fn header_lines(picture: &Picture<'_>, grid: &Grid<'_>, rows: i64, columns: i64) -> Vec<String> {
    let layout = picture.layout;
    let arena = picture.arena;
    let threads = layout.thread_extent(arena);
    let registers = match picture.registers {
        Some(1) => "1 register".to_owned(),
        Some(r) => format!("{r} registers"),
        None => "? registers".to_owned(),
    };
    let index: Vec<String> = layout
        .index
        .iter()
        .map(|&e| arena.display(e).to_string())
        .collect();
    let shape = format!("[{}]", join(&layout.shape, ", "));
    let mut lines = vec![
        format!(
            "shape {shape}, replicate {}, {registers} per thread (local shape [{}]), \
             threads 0..{threads} ({})",
            layout.replicate,
            join(&layout.local_shape(arena), ", "),
            match (threads + 31) / 32 {
                1 => "1 warp".to_owned(),
                warps => format!("{warps} warps"),
            },
        ),
        format!("thread = {}", arena.display(layout.thread)),
        format!("index  = ({})", index.join(", ")),
    ];
    if layout.shape.len() > 2 {
        lines.push(format!(
            "rows: the leading {} dimensions flattened row-major ({} rows); columns: the last",
            layout.shape.len() - 1,
            grid.rows
        ));
    }
    if grid.wrapped {
        lines.push(format!(
            "1-D: rows of {} elements, each labelled with its first index",
            grid.columns
        ));
        let drawn = (rows * columns).min(grid.elements());
        lines.push(if drawn < grid.elements() {
            format!(
                "cropped: showing elements 0..{drawn} of {}",
                grid.elements()
            )
        } else {
            format!("all {} elements shown", grid.elements())
        });
    } else if rows < grid.rows || columns < grid.columns {
        lines.push(format!(
            "cropped: showing rows 0..{rows} of {}, columns 0..{columns} of {}",
            grid.rows, grid.columns
        ));
    } else {
        lines.push(format!("all {} elements shown", grid.elements()));
    }
    let mut legend =
        "cell: T<owning thread> over [local index]; colour: hue by thread, shade by warp"
            .to_owned();
    if layout.replicate > 1 {
        let _ = write!(
            legend,
            "; hatched: held by {} threads (listed, as a range T0..T255, or as T0+9 more)",
            layout.replicate
        );
    }
    if rows > GRID_PERIOD || columns > GRID_PERIOD {
        let _ = write!(legend, "; thick lines every {GRID_PERIOD}");
    }
    lines.push(legend);
    lines
}
