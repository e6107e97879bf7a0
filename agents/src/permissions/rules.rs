//! Rules (stub; being written).
use super::*;
/// One rule (stub).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRule {
    /// Raw text.
    pub raw: String,
}
/// Rules by kind (stub).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// allow
    pub allow: Vec<PermissionRule>,
    /// ask
    pub ask: Vec<PermissionRule>,
    /// deny
    pub deny: Vec<PermissionRule>,
}
pub(crate) fn decide(policy: &PermissionPolicy, request: &PermissionRequest<'_>) -> Decision {
    match (policy.mode, request.kind) {
        (_, ToolKind::Read) => Decision::Allow,
        (PermissionMode::Bypass, _) => Decision::Allow,
        _ => Decision::Ask {
            reason: "stub".into(),
        },
    }
}
impl PermissionRule {
    /// Parses a rule (stub).
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(PermissionRule { raw: s.to_string() })
    }
}
/// Suggests a rule (stub).
pub fn suggest_rule(tool: &str, subject: Option<&str>) -> String {
    match subject {
        Some(s) => format!("{tool}({s})"),
        None => tool.to_string(),
    }
}
impl std::fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.raw)
    }
}
