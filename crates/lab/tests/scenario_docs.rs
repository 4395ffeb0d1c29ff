//! `docs/scenarios.md` documents every key of every study's scenario
//! format, and nothing else.
//!
//! Each study's section holds a table after a `<!-- keys: STUDY -->` line
//! whose first column is the key path (`table.key`, `table[].key` for a
//! key of an array of tables). The keys a parser accepts are read from the
//! parser itself: a key `zz_probe` is put into every table of every
//! embedded scenario file (and into every table the file omits), and the
//! parser's "unknown field `zz_probe`, expected one of …" error lists the
//! keys that table takes; the keys an embedded file (which loads) uses are
//! taken too. The test then checks that
//! (a) every key used in an embedded scenario file is documented, and
//! (b) the documented keys are exactly the keys the parser takes;
//! and that every ```toml example of the document loads.

use std::collections::BTreeSet;
use toml::{Table, Value};
use vantage_lab::studies::{self, certes, sbac, ssbt};
use vantage_lab::Study;
use vantage_sim::syn::scenario::Scenario as AbacusScenario;

const DOC: &str = include_str!("../../../docs/scenarios.md");
const PROBE: &str = "zz_probe";

/// A study's parser: the error text of a file it refuses.
type Parse = fn(&str) -> Result<(), String>;

fn parser(study: &str) -> Parse {
    match study {
        "abacus" => |t| {
            AbacusScenario::from_toml(t, "probe")
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
        "certes" => |t| {
            certes::CertesScenario::from_toml(t, "probe")
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
        "sbac" => |t| {
            sbac::SbacScenario::from_toml(t, "probe")
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
        "ssbt" => |t| {
            ssbt::SsbtScenario::from_toml(t, "probe")
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
        other => panic!("no parser for study {other}"),
    }
}

/// The keys documented for `study`: the first column of the table after
/// its `<!-- keys: STUDY -->` marker.
fn documented(study: &str) -> BTreeSet<String> {
    let marker = format!("<!-- keys: {study} -->");
    let mut lines = DOC.lines().skip_while(|l| l.trim() != marker);
    assert!(
        lines.next().is_some(),
        "docs/scenarios.md has no `{marker}` line"
    );
    let keys: BTreeSet<String> = lines
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim_start().starts_with('|'))
        .filter_map(|l| {
            let first = l.trim().trim_start_matches('|').split('|').next()?.trim();
            let key = first.strip_prefix('`')?.strip_suffix('`')?;
            Some(key.to_string())
        })
        .collect();
    assert!(
        !keys.is_empty(),
        "the table after `{marker}` in docs/scenarios.md lists no `key`"
    );
    keys
}

/// The keys named by an "unknown field `zz_probe`, expected …" error, or
/// `None` when `error` is another error (the probed value is no table).
fn expected_keys(error: &str) -> Option<Vec<String>> {
    let marker = format!("unknown field `{PROBE}`");
    let rest = &error[error.find(&marker)? + marker.len()..];
    let rest = rest.lines().next().unwrap_or("");
    Some(
        rest.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// The table at `path` in `doc`, created (as a table, or as an array of
/// one table when `array`) where missing. `None` when a value that is
/// not a table is in the way.
fn table_at<'a>(doc: &'a mut Table, path: &[(String, bool)]) -> Option<&'a mut Table> {
    let Some(((name, array), rest)) = path.split_first() else {
        return Some(doc);
    };
    let slot = doc.entry(name.clone()).or_insert_with(|| {
        if *array {
            Value::Array(vec![Value::Table(Table::new())])
        } else {
            Value::Table(Table::new())
        }
    });
    let table = match (slot, array) {
        (Value::Table(t), false) => t,
        (Value::Array(items), true) => match items.first_mut() {
            Some(Value::Table(t)) => t,
            _ => return None,
        },
        _ => return None,
    };
    table_at(table, rest)
}

fn render(path: &[(String, bool)]) -> String {
    path.iter()
        .map(|(name, array)| {
            if *array {
                format!("{name}[]")
            } else {
                name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The keys `parse` takes in the table at `path` of `doc` (with a probe
/// put in), or `None` when that is no table of the format.
fn probe(parse: Parse, doc: &Table, path: &[(String, bool)]) -> Option<Vec<String>> {
    let mut copy = doc.clone();
    let table = table_at(&mut copy, path)?;
    table.insert(PROBE.into(), Value::Integer(1));
    let text = toml::to_string(&copy).expect("a TOML table serializes");
    expected_keys(&parse(&text).err()?)
}

/// Every leaf key `parse` takes, found from the tables of `doc`.
fn accepted_from(
    parse: Parse,
    doc: &Table,
    path: &mut Vec<(String, bool)>,
    out: &mut BTreeSet<String>,
) {
    let keys = probe(parse, doc, path).unwrap_or_else(|| {
        panic!(
            "the probe key in `{}` was not refused as unknown",
            render(path)
        )
    });
    for key in keys {
        let mut found = false;
        for array in [false, true] {
            path.push((key.clone(), array));
            // A key is a table of the format when a probe put into it is
            // refused as unknown; it is a value otherwise.
            if probe(parse, doc, path).is_some() {
                accepted_from(parse, doc, path, out);
                found = true;
            }
            path.pop();
            if found {
                break;
            }
        }
        if !found {
            path.push((key, false));
            out.insert(render(path));
            path.pop();
        }
    }
}

/// The keys used in `table`: a documented key is a leaf even when its
/// value is a table (a map of names to weights).
fn used_keys(table: &Table, prefix: &str, documented: &BTreeSet<String>, out: &mut Vec<String>) {
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if documented.contains(&key) {
            out.push(key);
            continue;
        }
        match value {
            Value::Table(t) => used_keys(t, &key, documented, out),
            Value::Array(items) if items.iter().all(|v| v.is_table()) && !items.is_empty() => {
                for item in items {
                    if let Value::Table(t) = item {
                        used_keys(t, &format!("{key}[]"), documented, out);
                    }
                }
            }
            _ => out.push(key),
        }
    }
}

fn files(study: &str) -> &'static [(&'static str, &'static str)] {
    let files = studies::by_name(study)
        .expect("a registered study")
        .scenario_files();
    assert!(!files.is_empty(), "study {study} embeds no scenario file");
    files
}

fn check_study(study: &str) {
    let documented = documented(study);
    let parse = parser(study);
    let mut accepted = BTreeSet::new();
    let mut undocumented = Vec::new();
    for (origin, text) in files(study) {
        parse(text).unwrap_or_else(|e| panic!("{origin} does not load: {e}"));
        let doc: Table = toml::from_str(text).expect("an embedded file is TOML");
        let mut used = Vec::new();
        used_keys(&doc, "", &documented, &mut used);
        // A file that loads shows that every key it uses is taken (this is
        // how an enum's tag, such as `workload.kind`, counts as taken).
        accepted.extend(used.iter().filter(|k| documented.contains(*k)).cloned());
        undocumented.extend(
            used.into_iter()
                .filter(|k| !documented.contains(k))
                .map(|k| format!("{origin}: {k}")),
        );
        accepted_from(parse, &doc, &mut Vec::new(), &mut accepted);
    }

    // (b) the documented keys are exactly the keys the parser takes.
    let not_taken: Vec<&String> = documented.difference(&accepted).collect();
    let not_documented: Vec<&String> = accepted.difference(&documented).collect();
    assert!(
        not_taken.is_empty() && not_documented.is_empty(),
        "docs/scenarios.md and the {study} parser disagree:\n  documented, not taken by the parser: {not_taken:?}\n  taken by the parser, not documented: {not_documented:?}"
    );
    // (a) every key an embedded file uses is documented.
    assert!(
        undocumented.is_empty(),
        "embedded {study} files use keys docs/scenarios.md does not document: {undocumented:?}"
    );
}

#[test]
fn abacus_keys_are_documented() {
    check_study("abacus");
}

#[test]
fn certes_keys_are_documented() {
    check_study("certes");
}

#[test]
fn sbac_keys_are_documented() {
    check_study("sbac");
}

#[test]
fn ssbt_keys_are_documented() {
    check_study("ssbt");
}

/// The studies whose embedded files are scenario files; the cpa study's
/// is tcpeval's testbed plan, documented in `docs/tcpeval-live.md` ("The
/// plan file") and refused by `vantage sim`.
fn scenario_studies() -> Vec<&'static dyn Study> {
    studies::all()
        .into_iter()
        .filter(|s| s.name() != studies::cpa::NAME)
        .collect()
}

#[test]
fn every_study_has_a_documented_format() {
    for study in scenario_studies() {
        assert!(
            !documented(study.name()).is_empty(),
            "{} has no key table",
            study.name()
        );
    }
}

#[test]
fn the_probe_reads_an_unknown_field_error() {
    let keys = expected_keys("f: unknown field `zz_probe`, expected one of `a`, `b`, `c`");
    assert_eq!(keys, Some(vec!["a".into(), "b".into(), "c".into()]));
    assert_eq!(
        expected_keys("f: unknown field `zz_probe`, expected `a` or `b`"),
        Some(vec!["a".into(), "b".into()])
    );
    assert_eq!(expected_keys("f: invalid type: map, expected f64"), None);
}

/// Every ```toml example in docs/scenarios.md loads with the parser of
/// the study it names.
#[test]
fn every_example_loads() {
    let mut examples = 0;
    let mut rest = DOC;
    while let Some(start) = rest.find("```toml\n") {
        let body = &rest[start + "```toml\n".len()..];
        let end = body.find("```").expect("a closed ```toml block");
        let text = &body[..end];
        let doc: Table = toml::from_str(text)
            .unwrap_or_else(|e| panic!("an example in docs/scenarios.md is not TOML: {e}"));
        let study = doc
            .get("scenario")
            .and_then(|s| s.get("study"))
            .and_then(Value::as_str)
            .expect("an example names scenario.study");
        parser(study)(text)
            .unwrap_or_else(|e| panic!("the {study} example in docs/scenarios.md: {e}"));
        examples += 1;
        rest = &body[end + 3..];
    }
    assert_eq!(examples, scenario_studies().len(), "one example per study");
}
