//! A model certified from its parts: a model document pins the components it
//! uses by id, version and document SHA-256 (`uses`). It is certified on a
//! provider binary at a tier when a verified report says CERTIFIED for the
//! model's own stages and for each component it uses, all for that binary.

use super::{Statement, Verdict};
use serde::Serialize;
use vips_data::document::Document;
use vips_verdict::compare::Tier;

/// A component the model needs a report for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub component: String,
    pub version: String,
    pub document_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "standing", rename_all = "snake_case")]
pub enum Standing {
    /// Report `report` (0-based, in the order given) certifies it.
    Certified { report: usize },
    /// The report for it says NOT CERTIFIED, for these reasons.
    NotCertified { report: usize, reasons: Vec<String> },
    /// No report for it; `hint` says what came closest.
    Missing { hint: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCheck {
    pub model: String,
    pub tier: Tier,
    /// The provider binary every report must be about.
    pub provider_sha256: Option<String>,
    pub components: Vec<(Requirement, Standing)>,
    pub certified: bool,
}

/// Checks `statements` (already verified) against `model`: the model's own
/// document first, then each component of `uses`. `provider_sha256` pins
/// the provider binary; without it, the first report's binary is the one.
pub fn check_model(
    model: &Document,
    statements: &[Statement],
    tier: Tier,
    provider_sha256: Option<&str>,
) -> ModelCheck {
    let provider = provider_sha256.map(str::to_string).or_else(|| {
        statements
            .first()
            .map(|s| s.predicate.provider.library_sha256.clone())
    });
    let mut required = vec![Requirement {
        component: model.component.id.clone(),
        version: model.component.version.clone(),
        document_sha256: hex::encode(model.sha256),
    }];
    required.extend(model.uses.iter().map(|u| Requirement {
        component: u.component.clone(),
        version: u.version.clone(),
        document_sha256: hex::encode(u.sha256),
    }));
    let components: Vec<(Requirement, Standing)> = required
        .into_iter()
        .map(|r| {
            let standing = standing(&r, statements, tier, provider.as_deref());
            (r, standing)
        })
        .collect();
    let certified = components
        .iter()
        .all(|(_, s)| matches!(s, Standing::Certified { .. }));
    ModelCheck {
        model: model.component.id.clone(),
        tier,
        provider_sha256: provider,
        components,
        certified,
    }
}

fn standing(
    r: &Requirement,
    statements: &[Statement],
    tier: Tier,
    provider: Option<&str>,
) -> Standing {
    let same_component = |s: &&Statement| s.predicate.component.id == r.component;
    let matching: Vec<(usize, &Statement)> = statements
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            let p = &s.predicate;
            same_component(s)
                && p.component.version == r.version
                && p.component.document_sha256 == r.document_sha256
                && p.tier == tier
                && Some(p.provider.library_sha256.as_str()) == provider
        })
        .collect();
    if let Some((i, _)) = matching
        .iter()
        .find(|(_, s)| s.predicate.verdict == Verdict::Certified)
    {
        return Standing::Certified { report: *i };
    }
    if let Some((i, s)) = matching.first() {
        return Standing::NotCertified {
            report: *i,
            reasons: s.predicate.reasons.clone(),
        };
    }
    // Say what came closest: the right component, but not this one.
    let hint = statements.iter().find(same_component).map(|s| {
        let p = &s.predicate;
        if p.component.version != r.version || p.component.document_sha256 != r.document_sha256 {
            format!(
                "a report certifies {} {} with document SHA-256 {}; the model pins {} with {}",
                p.component.id,
                p.component.version,
                p.component.document_sha256,
                r.version,
                r.document_sha256
            )
        } else if p.tier != tier {
            format!(
                "a report covers tier {}, not {}",
                p.tier.name(),
                tier.name()
            )
        } else {
            format!(
                "a report covers another provider binary (SHA-256 {})",
                p.provider.library_sha256
            )
        }
    });
    Standing::Missing { hint }
}
