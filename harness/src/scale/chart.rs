//! The picture beside the table (docs/performance.svg): both patterns' figures as pairs of horizontal bars on one
//! logarithmic axis, since they span from a handful of calls to thousands and from seconds to minutes. A figure
//! that is zero is shown as "0" without a bar (a log scale has no zero); one not taken says why.

use std::path::Path;

use anyhow::anyhow;
use plotters::{
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use crate::scale::{
    ccm::total,
    figures::{Figures, Phase},
};

/// One figure of both patterns.
struct Row {
    name: String,
    ours: Value,
    go: Value,
}

#[derive(Clone, Copy)]
enum Value {
    Num(f64),
    NotReached,
    NotWithinLimit,
}

impl Value {
    fn at(f: &Figures, phase: Phase, v: f64) -> Self {
        if f.phase < phase {
            Self::NotReached
        } else if v.is_finite() {
            Self::Num(v)
        } else {
            Self::NotWithinLimit
        }
    }

    fn num(self) -> Option<f64> {
        match self {
            Self::Num(v) => Some(v),
            _ => None,
        }
    }

    fn text(self) -> String {
        match self {
            Self::Num(v) if v >= 10.0 || v.fract() == 0.0 => format!("{v:.0}"),
            Self::Num(v) => format!("{v:.1}"),
            Self::NotReached => "not reached".to_owned(),
            Self::NotWithinLimit => "not within the run's limit".to_owned(),
        }
    }
}

fn rows(ours: &Figures, go: &Figures) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut add = |name: String, phase: Phase, get: &dyn Fn(&Figures) -> f64| {
        rows.push(Row {
            name,
            ours: Value::at(ours, phase, get(ours)),
            go: Value::at(go, phase, get(go)),
        });
    };
    let di = |f: &Figures| f.burst_calls.get("DescribeInstances").copied().unwrap_or(0.0);
    add(
        format!("burst of {} Nodes: DescribeInstances", ours.nodes),
        Phase::Burst,
        &di,
    );
    add("burst: all AWS calls".into(), Phase::Burst, &|f| {
        total(&f.burst_calls)
    });
    add("burst: wall time, s".into(), Phase::Burst, &|f| f.burst);
    add("write floor, s".into(), Phase::Burst, &|f| f.floor);
    add("steady: AWS calls per hour".into(), Phase::Steady, &|f| {
        total(&f.steady)
    });
    add("join: AWS calls".into(), Phase::Join, &|f| total(&f.join));
    add("join: lag until registered, s".into(), Phase::Join, &|f| {
        f.join_lag
    });
    add("leave: AWS calls".into(), Phase::Leave, &|f| total(&f.leave));
    add("leave: lag until deregistered, s".into(), Phase::Leave, &|f| {
        f.leave_lag
    });
    add("CPU, whole run, s".into(), Phase::Done, &|f| f.cpu_total);
    let steps = ours.ensure.len().max(go.ensure.len());
    for i in 0..steps {
        let ensure = |f: &Figures| match f.ensure.get(i) {
            None => Value::NotReached,
            Some((_, secs, _)) => Value::at(f, Phase::Started, *secs),
        };
        let count = ours.ensure.get(i).or(go.ensure.get(i)).map_or(0, |e| e.0);
        rows.push(Row {
            name: format!("{count} Services served, s"),
            ours: ensure(ours),
            go: ensure(go),
        });
    }
    #[allow(clippy::cast_precision_loss)]
    let peak = |f: &Figures| {
        f.rss
            .iter()
            .map(|r| r.1)
            .max()
            .map_or(Value::NotReached, |kib| Value::Num(kib as f64 / 1024.0))
    };
    rows.push(Row {
        name: "peak RSS, MiB".into(),
        ours: peak(ours),
        go: peak(go),
    });
    rows
}

const OURS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const GO: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const ROW_PX: u32 = 44;

/// A tick of the logarithmic axis: fractions as they are, the rest without decimals.
fn x_label(v: &f64) -> String {
    if *v < 1.0 {
        format!("{v}")
    } else {
        format!("{v:.0}")
    }
}

/// Draws the chart of both patterns into `path` (SVG).
pub fn write(path: &Path, ours: &Figures, go: &Figures, title: &str) -> anyhow::Result<()> {
    let rows = rows(ours, go);
    let max = rows
        .iter()
        .flat_map(|r| [r.ours.num(), r.go.num()])
        .flatten()
        .fold(1.0_f64, f64::max);
    let top = 10f64.powf(max.log10().ceil() + 1.0);
    let n = u32::try_from(rows.len())?;
    let root = SVGBackend::new(path, (960, 90 + n * ROW_PX)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .margin_right(40)
        .x_label_area_size(28)
        .y_label_area_size(250)
        .build_cartesian_2d((0.1_f64..top).log_scale(), 0.0_f64..f64::from(n))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_label_formatter(&x_label)
        .x_desc("log scale: calls, seconds, MiB (shorter is better)")
        .draw()
        .map_err(err)?;
    for (label, colour, pick, offset) in [
        ("this CCM", OURS, (|r: &Row| r.ours) as fn(&Row) -> Value, 0.52),
        ("Go 1.20.2", GO, |r: &Row| r.go, 0.12),
    ] {
        let bars = rows.iter().enumerate().filter_map(|(i, r)| {
            let y = f64::from(n) - 1.0 - f64::from(u32::try_from(i).ok()?) + offset;
            let v = pick(r).num().filter(|v| *v > 0.0)?;
            Some(Rectangle::new(
                [(0.1, y), (v.max(0.1), y + 0.36)],
                colour.filled(),
            ))
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        let texts = rows.iter().enumerate().filter_map(|(i, r)| {
            let y = f64::from(n) - 1.0 - f64::from(u32::try_from(i).ok()?) + offset + 0.18;
            let v = pick(r);
            let at = v.num().filter(|v| *v > 0.1).unwrap_or(0.1);
            Some(Text::new(
                format!(" {}", v.text()),
                (at, y),
                ("sans-serif", 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
        });
        chart.draw_series(texts).map_err(err)?;
    }
    for (i, r) in rows.iter().enumerate() {
        let y = f64::from(n) - 1.0 - f64::from(u32::try_from(i)?) + 0.5;
        let (_, py) = chart.backend_coord(&(0.1, y));
        let style = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(r.name.clone(), (250, py), style))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_columns_with_missing_figures_named() {
        let mut ours = Figures::new("this CCM", 10);
        ours.phase = Phase::Done;
        ours.burst = 2.5;
        ours.floor = 2.0;
        ours.burst_calls.insert("DescribeInstances".into(), 2.0);
        ours.ensure = vec![(3, 4.0, 3)];
        ours.rss = vec![(3, 40 * 1024)];
        let mut go = Figures::new("Go 1.20.2", 10);
        go.phase = Phase::Join;
        go.burst = 30.0;
        go.join_lag = f64::INFINITY;
        go.ensure = vec![(3, f64::INFINITY, 1)];
        let dir = std::env::temp_dir().join(format!("scale-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        write(&path, &ours, &go, "test").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for text in [
            "this CCM",
            "Go 1.20.2",
            "3 Services served, s",
            "not within the run&apos;s limit",
            "not reached",
            "peak RSS, MiB",
            " 2.5",
            " 30",
        ] {
            assert!(
                svg.contains(text) || svg.contains(&text.replace('\'', "&apos;")),
                "missing {text:?}"
            );
        }
    }
}
