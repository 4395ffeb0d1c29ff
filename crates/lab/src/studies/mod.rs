//! The registry of studies, in the order `vantage reproduce` runs them.
//! `vantage sim FILE` picks the study a file names in `scenario.study`
//! (the Abacus study when it names none; the cpa study, which refuses it,
//! when it is tcpeval's testbed plan).

pub mod abacus;
pub mod certes;
pub mod cpa;
pub mod sbac;
pub mod ssbt;

use crate::{LabError, Study};

/// Every study, in the order `vantage reproduce` runs them.
pub fn all() -> [&'static dyn Study; 5] {
    [
        &abacus::AbacusStudy,
        &certes::CertesStudy,
        &sbac::SbacStudy,
        &ssbt::SsbtStudy,
        &cpa::CpaStudy,
    ]
}

/// The study called `name`.
pub fn by_name(name: &str) -> Result<&'static dyn Study, LabError> {
    all()
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| LabError::UnknownStudy {
            name: name.to_string(),
            known: names().join(", "),
        })
}

/// The study a scenario file belongs to: the one its `scenario.study`
/// names, or the Abacus study when it names none (or is not TOML: that
/// study's parser then reports the problem with the file). tcpeval's
/// testbed plan (`scenarios/cpa/section4.toml`) names none and goes to the
/// cpa study, whose `run` refuses it with the testbed command to use.
pub fn for_file(text: &str, origin: &str) -> Result<&'static dyn Study, LabError> {
    let Some(name) = study_of_file(text) else {
        if crate::tcpeval_live::TcpevalPlan::from_toml(text, origin).is_ok() {
            return Ok(&cpa::CpaStudy);
        }
        return Ok(&abacus::AbacusStudy);
    };
    all().into_iter().find(|s| s.name() == name).ok_or_else(|| {
        let quoted: Vec<String> = names().iter().map(|n| format!("\"{n}\"")).collect();
        let allowed = match quoted.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => quoted.join(""),
        };
        LabError::UnknownStudyInFile {
            origin: origin.to_string(),
            name,
            allowed,
        }
    })
}

fn names() -> Vec<&'static str> {
    all().iter().map(|s| s.name()).collect()
}

/// The `study` named in a scenario file's `[scenario]` table, if the file
/// is TOML and names one.
fn study_of_file(text: &str) -> Option<String> {
    let value: toml::Value = toml::from_str(text).ok()?;
    Some(value.get("scenario")?.get("study")?.as_str()?.to_string())
}
