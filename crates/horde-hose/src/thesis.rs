//! The thesis's example objectives, as shipped in `objectives/` (resolved where the
//! thesis is wrong; see docs/hose.md).

use crate::{compile, CompiledObjective};

/// Name, source, and the streams each objective's contexts select.
pub const THESIS: &[(&str, &str, &[u32])] = &[
    ("y1", include_str!("../../../objectives/y1.hose"), &[17]),
    ("y2", include_str!("../../../objectives/y2.hose"), &[7]),
    ("y3", include_str!("../../../objectives/y3.hose"), &[937]),
    (
        "fig7-4",
        include_str!("../../../objectives/fig7-4.hose"),
        &[2, 4],
    ),
    ("x1", include_str!("../../../objectives/x1.hose"), &[0, 3]),
    ("x2", include_str!("../../../objectives/x2.hose"), &[3]),
    ("x3", include_str!("../../../objectives/x3.hose"), &[3]),
    ("x4", include_str!("../../../objectives/x4.hose"), &[0]),
    ("b-1", include_str!("../../../objectives/b-1.hose"), &[0]),
];

/// A thesis objective by name (`"x1"`, `"fig7-4"`, ...), compiled.
pub fn thesis(name: &str) -> Option<CompiledObjective> {
    THESIS
        .iter()
        .find(|(n, _, _)| *n == name)
        .and_then(|(_, src, _)| compile(src).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_compile() {
        for (name, _, _) in THESIS {
            assert!(thesis(name).is_some(), "{name}");
        }
        assert!(thesis("nope").is_none());
    }
}
