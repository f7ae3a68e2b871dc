//! Types of application-defined fields, inferred from use: a field compared with a
//! string is a string field, one used in arithmetic is numeric, and so on. Fields
//! compared only with each other share a type (union-find); a field whose type
//! nothing determines is an error.

use std::collections::HashMap;

use crate::ir::Scalar;

#[derive(Debug, Default)]
pub(crate) struct FieldTypes {
    names: Vec<String>,
    index: HashMap<String, usize>,
    parent: Vec<usize>,
    ty: Vec<Option<Scalar>>,
    /// Where the type was first fixed, for conflict messages.
    fixed_at: Vec<u32>,
}

impl FieldTypes {
    /// The id of a field name, creating it on first sight.
    pub fn id(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        self.parent.push(i);
        self.ty.push(None);
        self.fixed_at.push(0);
        i
    }

    pub fn root(&self, mut i: usize) -> usize {
        while self.parent[i] != i {
            i = self.parent[i];
        }
        i
    }

    /// The type of a field, if known.
    pub fn ty(&self, i: usize) -> Option<Scalar> {
        self.ty[self.root(i)]
    }

    /// Where the field's type was fixed.
    pub fn fixed_at(&self, i: usize) -> u32 {
        self.fixed_at[self.root(i)]
    }

    /// Fix the type of a field unless already known (conflicts are reported later,
    /// when the use is lowered).
    pub fn assign(&mut self, i: usize, ty: Scalar, at: u32) {
        let r = self.root(i);
        if self.ty[r].is_none() {
            self.ty[r] = Some(ty);
            self.fixed_at[r] = at;
        }
    }

    /// Two fields compared with each other have the same type.
    pub fn unify(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra == rb {
            return;
        }
        self.parent[rb] = ra;
        if self.ty[ra].is_none() {
            self.ty[ra] = self.ty[rb];
            self.fixed_at[ra] = self.fixed_at[rb];
        }
    }

    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_fields_share_a_type() {
        let mut t = FieldTypes::default();
        let a = t.id("a");
        let b = t.id("b");
        t.unify(a, b);
        assert_eq!(t.ty(a), None);
        t.assign(b, Scalar::Str, 7);
        assert_eq!(t.ty(a), Some(Scalar::Str));
        assert_eq!(t.fixed_at(a), 7);
        // The first assignment wins; later uses are checked against it.
        t.assign(a, Scalar::Num, 9);
        assert_eq!(t.ty(b), Some(Scalar::Str));
        assert_eq!(t.id("a"), a);
    }
}
