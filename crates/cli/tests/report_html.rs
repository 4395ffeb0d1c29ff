//! The HTML report in a headless browser: `vantage reproduce --quick`
//! writes `quick/index.html`; Chromium (`chromium --headless`, no root)
//! loads it, and the DOM it builds must hold every statement of the run's
//! JSON and every SVG file the studies wrote, with no image pointing at a
//! missing file; a screenshot is kept under `target/test-artefacts/`.
//! The run passes `--skip-testbed`: the testbed study (cpa, root only) has
//! its own test (`tcpeval_live.rs`), and here it must show as not run,
//! with its reason, in the JSON and on the page.
//! Without Chromium the test says so and passes, unless
//! `VANTAGE_REQUIRE_CHROMIUM=1`. `vantage sim` writes the page of its own
//! folder too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one Chromium invocation may take before it is killed.
const BROWSER_LIMIT: Duration = Duration::from_secs(120);

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("VANTAGE_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Runs `command` with its output captured, killed after `limit`.
fn run_bounded(command: &mut Command, limit: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let started = Instant::now();
    // Read both pipes on threads so a full pipe cannot stall the child.
    let mut stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).map(|_| buf)
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut buf).map(|_| buf)
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the command") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().expect("reader").unwrap_or_default(),
        stderr: err.join().expect("reader").unwrap_or_default(),
    }
}

/// `text` as a serialized DOM shows it in element content.
fn dom_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

fn browser(chromium: &Path, profile: &Path, args: &[String], url: &str) -> Output {
    let out = run_bounded(
        Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .arg(url),
        BROWSER_LIMIT,
    );
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The SVG files under each study folder of `root`, as (folder, file name).
fn svg_files(root: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for study in std::fs::read_dir(root).expect("results folder") {
        let study = study.expect("entry").path();
        if !study.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&study).expect("study folder") {
            let file = file.expect("entry").path();
            if file.extension().is_some_and(|x| x == "svg") {
                files.push((
                    study.file_name().unwrap().to_string_lossy().into_owned(),
                    file.file_name().unwrap().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    files.sort();
    files
}

/// Every `src` of an `<img>` element in `dom`.
fn image_sources(dom: &str) -> Vec<String> {
    dom.match_indices("<img")
        .filter_map(|(at, _)| {
            let tag = &dom[at..dom[at..].find('>').map_or(dom.len(), |end| at + end)];
            let src = tag.split("src=\"").nth(1)?;
            Some(src[..src.find('"').unwrap_or(src.len())].to_string())
        })
        .collect()
}

#[test]
fn the_quick_report_renders_with_every_statement_and_figure() {
    let chromium = chromium();
    let required = std::env::var("VANTAGE_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
    let tmp = std::env::temp_dir().join(format!("vantage-report-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let out_dir = tmp.join("results");
    let run = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["reproduce", "--quick", "--skip-testbed", "--json", "--out"])
        .arg(&out_dir)
        .output()
        .expect("the vantage binary runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON document");
    let checks = doc["checks"].as_array().expect("checks");
    assert!(!checks.is_empty());
    assert_eq!(doc["cpa"]["ran"], false, "{}", doc["cpa"]);
    assert_eq!(doc["cpa"]["reason"], "--skip-testbed was given");
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("cpa: not run: --skip-testbed was given"),
        "stderr does not say the testbed study was not run"
    );
    let root = out_dir.join("quick");
    let index = root.join("index.html");
    assert!(index.is_file(), "{} was not written", index.display());
    let figures = svg_files(&root);
    for study in ["abacus", "certes", "sbac", "ssbt"] {
        assert!(
            figures.iter().any(|(s, _)| s == study),
            "{study} wrote no SVG"
        );
    }

    let Some(chromium) = chromium else {
        let message = "chromium is not installed (nor chromium-browser, google-chrome, \
                       $VANTAGE_CHROMIUM): the report was written but not rendered";
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(!required, "VANTAGE_REQUIRE_CHROMIUM=1: {message}");
        eprintln!("skipped: {message}");
        return;
    };
    let url = format!(
        "file://{}",
        std::fs::canonicalize(&index).expect("index").display()
    );
    let profile = tmp.join("chromium-profile");
    let dom = browser(&chromium, &profile, &["--dump-dom".to_string()], &url);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(
        dom.contains("<h1>"),
        "not the report: {}",
        &dom[..dom.len().min(500)]
    );

    // Every statement, with its criterion and verdict.
    for c in checks {
        for key in ["claim", "paper", "ours", "criterion"] {
            let text = c[key].as_str().unwrap_or_else(|| panic!("{key} in {c}"));
            assert!(
                dom.contains(&dom_text(text)),
                "{key} {text:?} not in the DOM"
            );
        }
    }
    assert!(
        dom.contains("not run: --skip-testbed was given"),
        "the cpa study's summary row does not say it was not run"
    );
    assert!(dom.contains("Not run: --skip-testbed was given."));
    let verdicts = dom.matches("<td class=\"holds\">").count();
    assert_eq!(verdicts, checks.len(), "one verdict cell per statement");
    let held = checks.iter().filter(|c| c["holds"] == true).count();
    assert!(dom.contains(&format!("{held} of {}", checks.len())));

    // Every figure, inlined, captioned with its file name.
    for (study, file) in &figures {
        assert!(
            dom.contains(&format!("<figcaption>{}</figcaption>", dom_text(file))),
            "{study}/{file} not in the DOM"
        );
    }
    assert!(dom.matches("<figure").count() >= figures.len());
    assert!(dom.matches("<svg").count() >= figures.len());
    assert!(!dom.contains("not shown:"), "a figure was not inlined");

    // No broken image: every <img> source exists (the report inlines its
    // figures, so there should be none at all).
    for src in image_sources(&dom) {
        let path = src.strip_prefix("file://").unwrap_or(&src);
        let path = root.join(path);
        assert!(path.is_file(), "<img src={src:?}> points at a missing file");
    }

    // The differences of each study, under its statements.
    assert!(
        dom.matches("<div class=\"differences\">").count() >= 1,
        "no study's differences on the page"
    );

    // At 1280 px no table is wider than the window: a copy of the page
    // with a measuring script (the report itself has none) records the
    // widths in attributes that --dump-dom shows.
    let probe = tmp.join("probe.html");
    let page = std::fs::read_to_string(&index).expect("index");
    let script = "<script>\
        const widest = Math.max(0, ...[...document.querySelectorAll('table')]\
            .map(t => Math.ceil(t.getBoundingClientRect().right)));\
        document.body.setAttribute('data-viewport', document.documentElement.clientWidth);\
        document.body.setAttribute('data-widest-table', widest);\
        document.body.setAttribute('data-scroll-width', document.documentElement.scrollWidth);\
        </script></body>";
    std::fs::write(&probe, page.replace("</body>", script)).expect("probe page");
    let measured = browser(
        &chromium,
        &profile,
        &[
            "--dump-dom".to_string(),
            "--window-size=1280,800".to_string(),
        ],
        &format!("file://{}", probe.display()),
    );
    let measured = String::from_utf8_lossy(&measured.stdout).into_owned();
    let attribute = |name: &str| -> u64 {
        let key = format!("{name}=\"");
        let start = measured
            .find(&key)
            .unwrap_or_else(|| panic!("{name} not measured"))
            + key.len();
        let end = start + measured[start..].find('"').expect("closing quote");
        measured[start..end].parse().expect("a width in pixels")
    };
    let viewport = attribute("data-viewport");
    assert!(
        (1200..=1280).contains(&viewport),
        "the window is {viewport} px wide, not about 1280"
    );
    let widest = attribute("data-widest-table");
    assert!(
        widest <= viewport,
        "a table reaches {widest} px in a {viewport} px window"
    );
    let scroll = attribute("data-scroll-width");
    assert!(
        scroll <= viewport,
        "the page scrolls sideways: {scroll} px in a {viewport} px window"
    );

    // A screenshot, kept as a test artefact.
    let artefacts = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("test-artefacts");
    std::fs::create_dir_all(&artefacts).expect("artefact folder");
    let png = artefacts.join("report.png");
    let _ = std::fs::remove_file(&png);
    browser(
        &chromium,
        &profile,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,4000".to_string(),
        ],
        &url,
    );
    let bytes = std::fs::read(&png).expect("the screenshot was written");
    assert!(bytes.len() > 1000, "screenshot of {} bytes", bytes.len());
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    eprintln!("screenshot: {}", png.display());
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn sim_writes_the_report_of_its_folder() {
    let tmp = std::env::temp_dir().join(format!("vantage-report-sim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/ssbt/fig6-send-buffer.toml");
    let run = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .arg("sim")
        .arg(&scenario)
        .args(["--quick", "--json", "--out"])
        .arg(&tmp)
        .output()
        .expect("the vantage binary runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON document");
    let checks = doc["checks"].as_array().expect("checks");
    assert!(!checks.is_empty());
    let folder = tmp.join("quick/sim/fig6-send-buffer");
    let page = std::fs::read_to_string(folder.join("index.html")).expect("index.html written");
    assert!(page.contains("id=\"study-ssbt\""));
    assert!(page.contains(&format!(
        "{} of {}",
        checks.iter().filter(|c| c["holds"] == true).count(),
        checks.len()
    )));
    for c in checks {
        let criterion = c["criterion"].as_str().expect("criterion");
        assert!(
            page.contains(&html_escape(criterion)),
            "{criterion:?} not in the page"
        );
    }
    assert!(
        page.contains("fig6-send-buffer.toml"),
        "the scenario file's provenance"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `text` as the report escapes it.
fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
