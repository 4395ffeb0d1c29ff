//! The report people read: `index.html` in a results folder, one
//! self-contained page (inline CSS and SVG, no script, no network) with a
//! summary of the statements that hold per study, then one section per
//! study: the paper, the provenance its `manifest.json` records, every
//! statement (paper | ours | unit | criterion | holds), why ours differs
//! from the paper (`docs/differences/<study>.md`, [`DIFFERENCES`]) and
//! every SVG the study wrote into its folder, inlined with its file name
//! as caption. A study that was not run (the testbed study on a machine
//! that cannot run it) shows "not run" and its reason, in the summary and
//! its section, and no statements or figures (an earlier run's files in
//! its folder are not shown as this run's).
//!
//! The page is written with a small escape function rather than a template
//! crate: one fixed layout, and every piece of text goes through
//! [`escape`]. The SVG files are the lab's own plots (plotters' output);
//! only their `<svg>` element is inlined, a file larger than
//! [`MAX_INLINE_SVG_BYTES`] or one without an `<svg>` element is named on
//! the page as not shown, never dropped silently.

use crate::provenance::{Manifest, MANIFEST_FILE};
use crate::{studies, Check, LabError, StudyOutcome};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The report's file name in a results folder.
pub const REPORT_FILE: &str = "index.html";

/// The largest SVG file inlined (a plot of ours is well under 1 MiB).
pub const MAX_INLINE_SVG_BYTES: u64 = 16 << 20;

const STYLE: &str = "
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; }
h2 { border-bottom: 2px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
table.checks { width: 100%; table-layout: fixed; }
table.checks col.figure { width: 7%; }
table.checks col.profile { width: 9%; }
table.checks col.statement { width: 27%; }
table.checks col.paper, table.checks col.ours { width: 10%; }
table.checks col.unit { width: 6%; }
table.checks col.criterion { width: 25%; }
table.checks col.holds { width: 6%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; text-align: left;
         overflow-wrap: anywhere; }
div.differences { background: #f7f7fb; border-left: 4px solid #99c; padding: 0.1em 1em; }
th { background: #f0f0f0; }
td.num { text-align: right; }
td.holds { font-weight: bold; text-align: center; }
tr.held td.holds { background: #d8f0d8; color: #1a641a; }
tr.failed td.holds { background: #f8d0d0; color: #9a1010; }
tr.failed { background: #fff6f6; }
tr.not-run td { background: #f0f0f0; color: #555; font-style: italic; }
dl.provenance { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em;
                font-size: 0.9em; }
dl.provenance dt { font-weight: bold; }
dl.provenance dd { margin: 0; }
figure { margin: 1.2em 0; border: 1px solid #ddd; padding: 0.5em; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-family: monospace; font-size: 0.9em; color: #555; margin-top: 0.3em; }
p.missing { color: #9a1010; }
";

/// Writes `root/index.html` for the studies of `outcomes` (each one's
/// files under `root/<study>`), reading each study's `manifest.json` and
/// SVG files there; returns the page's path.
pub fn write_report(root: &Path, outcomes: &[(&str, StudyOutcome)]) -> Result<PathBuf, LabError> {
    let page = render(root, outcomes);
    crate::error::create_dir(root)?;
    let path = root.join(REPORT_FILE);
    std::fs::write(&path, page).map_err(|source| LabError::WriteFile {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The page for `outcomes`, reading manifests and figures under `root`.
pub fn render(root: &Path, outcomes: &[(&str, StudyOutcome)]) -> String {
    let mut page = String::new();
    page.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Vantage: the papers' statements beside our results</title>\n<style>",
    );
    page.push_str(STYLE);
    page.push_str("</style>\n</head>\n<body>\n");
    page.push_str("<h1>Vantage: the papers' statements beside our results</h1>\n");
    let top = read_manifest(root);
    match &top {
        Ok(m) => {
            let _ = writeln!(
                page,
                "<p>A {} run of <code>{}</code>, started {} UTC, {:.0} s; vantage {} at commit <code>{}</code>.</p>",
                escape(&m.mode),
                escape(&m.command_line.join(" ")),
                escape(&m.started_at),
                m.duration_s,
                escape(&m.vantage_version),
                escape(&m.git_commit)
            );
        }
        Err(why) => {
            let _ = writeln!(page, "<p class=\"missing\">{}</p>", escape(why));
        }
    }
    summary(&mut page, outcomes);
    for (name, outcome) in outcomes {
        section(&mut page, root, name, outcome);
    }
    page.push_str("</body>\n</html>\n");
    page
}

/// The statements held per study, with links to the sections.
fn summary(page: &mut String, outcomes: &[(&str, StudyOutcome)]) {
    page.push_str("<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\">\n");
    page.push_str("<tr><th>study</th><th>paper</th><th>statements that hold</th></tr>\n");
    let (mut held, mut total) = (0, 0);
    for (name, outcome) in outcomes {
        if let Some(reason) = outcome.not_run_reason() {
            let _ = writeln!(
                page,
                "<tr class=\"not-run\"><td><a href=\"#study-{}\">{}</a></td><td>{}</td><td>not run: {}</td></tr>",
                escape(name),
                escape(name),
                escape(title(name)),
                escape(reason),
            );
            continue;
        }
        let h = outcome.checks.iter().filter(|c| c.holds).count();
        let n = outcome.checks.len();
        held += h;
        total += n;
        let _ = writeln!(
            page,
            "<tr class=\"{}\"><td><a href=\"#study-{}\">{}</a></td><td>{}</td><td class=\"num\">{h} of {n}</td></tr>",
            if h == n { "held" } else { "failed" },
            escape(name),
            escape(name),
            escape(title(name)),
        );
    }
    let _ = writeln!(
        page,
        "<tr><th colspan=\"2\">all studies</th><th class=\"num\">{held} of {total}</th></tr>\n</table>"
    );
}

fn title(study: &str) -> &'static str {
    studies::by_name(study).map_or("", |s| s.paper_title())
}

fn section(page: &mut String, root: &Path, name: &str, outcome: &StudyOutcome) {
    let dir = root.join(name);
    let _ = writeln!(
        page,
        "<section id=\"study-{}\">\n<h2>{} — {}</h2>",
        escape(name),
        escape(name),
        escape(title(name))
    );
    if let Ok(study) = studies::by_name(name) {
        let _ = writeln!(
            page,
            "<p>Paper: <code>papers/{}</code>. Files: <code>{}</code>.</p>",
            escape(study.paper()),
            escape(&dir.display().to_string())
        );
    }
    match read_manifest(&dir) {
        Ok(m) => provenance(page, &m),
        Err(why) => {
            let _ = writeln!(page, "<p class=\"missing\">{}</p>", escape(&why));
        }
    }
    let not_run = outcome.not_run_reason();
    match not_run {
        Some(reason) => {
            let _ = writeln!(
                page,
                "<p class=\"missing not-run\">Not run: {}. None of the paper's statements is checked.</p>",
                escape(reason)
            );
        }
        None => statements(page, &outcome.checks),
    }
    if let Some(text) = differences(name) {
        page.push_str(&markdown(text));
    }
    if not_run.is_none() {
        figures(page, name, &dir);
    }
    page.push_str("</section>\n");
}

fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("no provenance: cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("no provenance: {} does not parse: {e}", path.display()))
}

fn provenance(page: &mut String, m: &Manifest) {
    page.push_str("<h3>Provenance</h3>\n<dl class=\"provenance\">\n");
    let mut row = |key: &str, value: String| {
        let _ = writeln!(page, "<dt>{}</dt><dd>{}</dd>", escape(key), escape(&value));
    };
    row("mode", m.mode.clone());
    row("vantage", m.vantage_version.clone());
    row("commit", m.git_commit.clone());
    row("command", m.command_line.join(" "));
    row("started", format!("{} UTC", m.started_at));
    row(
        "duration",
        format!(
            "{:.1} s from the run's start to this study's end",
            m.duration_s
        ),
    );
    row("threads", m.threads.to_string());
    row(
        "machine",
        format!(
            "{}, {} CPUs ({}), Linux {}",
            m.machine.hostname, m.machine.cpu_count, m.machine.cpu_model, m.machine.kernel_release
        ),
    );
    if let Some(file) = &m.scenario_file {
        row("scenario file", file.clone());
    }
    for study in &m.studies {
        for scenario in &study.scenarios {
            let settings = if scenario.settings.is_empty() {
                "seeds and repetitions: the study's defaults".to_string()
            } else {
                scenario
                    .settings
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            row(&scenario.origin, settings);
        }
    }
    page.push_str("</dl>\n");
}

fn statements(page: &mut String, checks: &[Check]) {
    let held = checks.iter().filter(|c| c.holds).count();
    let _ = writeln!(
        page,
        "<h3>The paper's statements beside ours: {held} of {} hold</h3>",
        checks.len()
    );
    if checks.is_empty() {
        return;
    }
    page.push_str(
        "<table class=\"checks\">\n<colgroup><col class=\"figure\"><col class=\"profile\">\
         <col class=\"statement\"><col class=\"paper\"><col class=\"ours\"><col class=\"unit\">\
         <col class=\"criterion\"><col class=\"holds\"></colgroup>\n<tr><th>figure</th><th>profile</th><th>statement</th>\
         <th>paper</th><th>ours</th><th>unit</th><th>criterion</th><th>holds</th></tr>\n",
    );
    for c in checks {
        let _ = writeln!(
            page,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"holds\">{}</td></tr>",
            if c.holds { "held" } else { "failed" },
            escape(&c.figure),
            escape(&c.profile),
            escape(&c.claim),
            escape(&c.paper),
            escape(&c.ours),
            escape(c.unit.as_deref().unwrap_or("")),
            escape(&c.criterion),
            if c.holds { "yes" } else { "NO" },
        );
    }
    page.push_str("</table>\n");
}

/// Each study's "where ours differs, and why" text: the one copy, in
/// `docs/differences/<study>.md`, which the README links.
pub const DIFFERENCES: [(&str, &str); 5] = [
    (
        "abacus",
        include_str!("../../../../docs/differences/abacus.md"),
    ),
    (
        "certes",
        include_str!("../../../../docs/differences/certes.md"),
    ),
    ("sbac", include_str!("../../../../docs/differences/sbac.md")),
    ("ssbt", include_str!("../../../../docs/differences/ssbt.md")),
    ("cpa", include_str!("../../../../docs/differences/cpa.md")),
];

/// The differences text of `study`, if it has one.
pub fn differences(study: &str) -> Option<&'static str> {
    DIFFERENCES
        .iter()
        .find(|(name, _)| *name == study)
        .map(|(_, text)| *text)
}

/// The little Markdown the differences files use, as HTML: a `# ` heading
/// (as `<h3>`), paragraphs, `* ` lists with indented continuation lines,
/// `**bold**`, `` `code` `` and `[text](link)` (the text only: the page
/// links nothing outside itself). Written by hand: these four constructs
/// do not call for a Markdown crate, and everything is escaped first.
pub fn markdown(text: &str) -> String {
    let mut html = String::from("<div class=\"differences\">\n");
    let mut paragraph: Vec<&str> = Vec::new();
    let mut items: Vec<String> = Vec::new();
    let flush_paragraph = |html: &mut String, paragraph: &mut Vec<&str>| {
        if !paragraph.is_empty() {
            let _ = writeln!(html, "<p>{}</p>", inline(&paragraph.join(" ")));
            paragraph.clear();
        }
    };
    let flush_list = |html: &mut String, items: &mut Vec<String>| {
        if !items.is_empty() {
            html.push_str("<ul>\n");
            for item in items.iter() {
                let _ = writeln!(html, "<li>{}</li>", inline(item));
            }
            html.push_str("</ul>\n");
            items.clear();
        }
    };
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            flush_paragraph(&mut html, &mut paragraph);
            flush_list(&mut html, &mut items);
        } else if let Some(heading) = line.strip_prefix("# ") {
            flush_paragraph(&mut html, &mut paragraph);
            flush_list(&mut html, &mut items);
            let _ = writeln!(html, "<h3>{}</h3>", inline(heading));
        } else if let Some(item) = line.strip_prefix("* ") {
            flush_paragraph(&mut html, &mut paragraph);
            items.push(item.to_string());
        } else if line.starts_with(' ') && !items.is_empty() {
            if let Some(last) = items.last_mut() {
                last.push(' ');
                last.push_str(trimmed);
            }
        } else {
            flush_list(&mut html, &mut items);
            paragraph.push(trimmed);
        }
    }
    flush_paragraph(&mut html, &mut paragraph);
    flush_list(&mut html, &mut items);
    html.push_str("</div>\n");
    html
}

/// `**bold**`, `` `code` `` and `[text](link)` of one escaped line.
fn inline(text: &str) -> String {
    let escaped = escape(text);
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped.as_str();
    while let Some(ch) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("**") {
            if let Some(end) = after.find("**") {
                let _ = write!(out, "<strong>{}</strong>", &after[..end]);
                rest = &after[end + 2..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('`') {
            if let Some(end) = after.find('`') {
                let _ = write!(out, "<code>{}</code>", &after[..end]);
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('[') {
            if let Some((label, tail)) = after.split_once("](") {
                if let Some(end) = tail.find(')') {
                    out.push_str(label);
                    rest = &tail[end + 1..];
                    continue;
                }
            }
        }
        out.push(ch);
        rest = &rest[ch.len_utf8()..];
    }
    out
}

/// Every `*.svg` in `dir` (the folder of `study`), by file name, inlined.
fn figures(page: &mut String, study: &str, dir: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "svg"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let _ = writeln!(page, "<h3>Figures ({})</h3>", files.len());
    for path in files {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        match inline_svg(&path) {
            Ok(svg) => {
                let _ = writeln!(
                    page,
                    "<figure id=\"figure-{}-{}\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
                    escape(study),
                    escape(&name),
                    escape(&name)
                );
            }
            Err(why) => {
                let _ = writeln!(
                    page,
                    "<p class=\"missing\">{} not shown: {}</p>",
                    escape(&name),
                    escape(&why)
                );
            }
        }
    }
}

/// The `<svg>…</svg>` element of an SVG file (without the XML prolog).
fn inline_svg(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > MAX_INLINE_SVG_BYTES {
        return Err(format!(
            "{size} bytes, over the {MAX_INLINE_SVG_BYTES}-byte limit for inlining"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let start = text.find("<svg").ok_or("no <svg> element")?;
    let end = text
        .rfind("</svg>")
        .filter(|&end| end > start)
        .ok_or("no closing </svg>")?;
    Ok(text[start..end + "</svg>".len()].to_string())
}

/// `text` with the characters HTML gives a meaning escaped, for element
/// content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::RunRecord;
    use crate::{Criterion, ScenarioFile};

    fn outcome(checks: Vec<Check>) -> StudyOutcome {
        StudyOutcome {
            rows: serde_json::Value::Null,
            checks,
            document: String::new(),
            summary: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_study_not_run_renders_as_not_run_with_its_reason_and_no_figure() {
        let root =
            std::env::temp_dir().join(format!("vantage-html-not-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("cpa");
        std::fs::create_dir_all(&dir).unwrap();
        // An earlier run's figure must not be shown as this run's.
        std::fs::write(dir.join("figure4.svg"), "<svg><text>old</text></svg>").unwrap();
        let reason = "`nginx` is not installed <yet>";
        let held = Check::statement("f", "p", "c", "1", "1").judge(1.0, Criterion::AtMost(2.0));
        let outcomes = [
            ("sbac", outcome(vec![held])),
            ("cpa", StudyOutcome::not_run(reason)),
        ];
        let page = render(&root, &outcomes);
        let escaped = escape(reason);
        assert!(
            page.contains(&format!("<td>not run: {escaped}</td>")),
            "summary row: {page}"
        );
        assert!(page.contains(&format!("Not run: {escaped}.")), "section");
        assert!(!page.contains("cpa</a></td><td>Critical Path Analysis of TCP Transactions (Barford, Crovella)</td><td class=\"num\">0 of 0"));
        assert!(
            !page.contains("<text>old</text>"),
            "a stale figure is shown"
        );
        assert!(page.contains("tcpeval Section 4: where ours differs"));
        // The all-studies count leaves the study out rather than passing it.
        assert!(page.contains("<th class=\"num\">1 of 1</th>"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("σ ≤ 2.5 %"), "σ ≤ 2.5 %");
    }

    #[test]
    fn the_page_holds_every_statement_figure_and_the_provenance() {
        let root = std::env::temp_dir().join(format!("vantage-html-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("sbac");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("fig1.svg"),
            "<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\"><text>a</text></svg>\n",
        )
        .unwrap();
        std::fs::write(dir.join("broken.svg"), "not a plot").unwrap();
        let files = [ScenarioFile {
            origin: "scenarios/sbac/a.toml",
            text: "[scenario]\nseed = 7\n",
        }];
        let record = RunRecord::start(vec!["vantage".into(), "reproduce".into()], true, None);
        record
            .manifest(&[("sbac", files.as_slice())])
            .write(&dir)
            .unwrap();
        record
            .manifest(&[("sbac", files.as_slice())])
            .write(&root)
            .unwrap();
        let checks = vec![
            Check::statement(
                "Fig. 3b",
                "m = 5",
                "utilization <b>low</b>",
                "< 7 %",
                "31 %",
            )
            .unit("%")
            .judge(31.0, Criterion::Below(7.0)),
            Check::statement("Fig. 8a", "m = 15", "stable > responsive", "—", "2 vs 1")
                .relation("stable's > responsive's", true),
        ];
        let path = write_report(&root, &[("sbac", outcome(checks))]).unwrap();
        assert_eq!(path, root.join(REPORT_FILE));
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(page.contains("utilization &lt;b&gt;low&lt;/b&gt;"));
        assert!(!page.contains("<b>low</b>"));
        assert!(page.contains("ours &lt; 7 %"));
        assert!(page.contains("stable&#39;s &gt; responsive&#39;s"));
        assert!(page.contains("1 of 2"));
        assert!(page.contains("<svg width=\"10\" height=\"10\"><text>a</text></svg>"));
        assert!(!page.contains("<?xml"));
        assert!(page.contains("<figcaption>fig1.svg</figcaption>"));
        assert!(page.contains("<figure id=\"figure-sbac-fig1.svg\">"));
        assert!(page.contains("broken.svg not shown: no &lt;svg&gt; element"));
        assert!(page.contains("scenario.seed = 7"));
        assert!(page.contains("Session-Based Admission Control"));
        assert!(page.contains(">quick<"));
        assert!(!page.contains("<script"));
        assert!(!page.contains("<img"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_folder_without_manifest_says_so() {
        let root = std::env::temp_dir().join(format!("vantage-html-none-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let page = render(&root, &[("abacus", outcome(Vec::new()))]);
        assert!(page.contains("no provenance: cannot read"));
        assert!(page.contains("0 of 0"));
    }
    #[test]
    fn every_study_has_its_differences_and_the_readme_only_links_them() {
        let readme = include_str!("../../../../README.md");
        for study in studies::all() {
            let name = study.name();
            let text = differences(name).unwrap_or_else(|| panic!("{name}: no differences file"));
            let link = format!("docs/differences/{name}.md");
            assert!(readme.contains(&link), "README does not link {link}");
            // One copy: no line of the file's text is also in the README.
            for line in text.lines().skip(1).map(str::trim).filter(|l| l.len() > 40) {
                assert!(
                    !readme.contains(line),
                    "README repeats a line of {link}: {line}"
                );
            }
            let html = markdown(text);
            assert!(html.contains("<h3>"), "{name}: {html}");
        }
    }

    #[test]
    fn markdown_renders_lists_emphasis_and_code_escaped() {
        let html = markdown(
            "# Title\n\nA paragraph\nwith `a<b` and [a link](x.md).\n\n* **Bold** item\n  continued\n* second & last\n",
        );
        assert!(html.contains("<h3>Title</h3>"), "{html}");
        assert!(
            html.contains("<p>A paragraph with <code>a&lt;b</code> and a link.</p>"),
            "{html}"
        );
        assert!(
            html.contains("<li><strong>Bold</strong> item continued</li>"),
            "{html}"
        );
        assert!(html.contains("<li>second &amp; last</li>"), "{html}");
    }

    #[test]
    fn statements_table_wraps_to_the_page_width() {
        let page = render(Path::new("/nonexistent"), &[]);
        assert!(page.contains("table.checks { width: 100%; table-layout: fixed; }"));
        assert!(page.contains("overflow-wrap: anywhere"));
    }
}
