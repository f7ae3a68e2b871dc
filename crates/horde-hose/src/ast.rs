//! The syntax tree of one hose objective, as parsed (before any checking).
//! Positions are byte offsets into the source.

/// A name with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ident {
    pub name: String,
    pub pos: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarKind {
    Adu,
    Stream,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Binding {
    pub kind: VarKind,
    pub name: Ident,
    pub filter: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UtilityEntry {
    pub var: Ident,
    pub expr: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Section {
    Context {
        pos: u32,
        bindings: Vec<Binding>,
    },
    Goal {
        pos: u32,
        expr: Expr,
    },
    Utility {
        pos: u32,
        entries: Vec<UtilityEntry>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Program {
    /// Where `objective` is written; missing sections are reported here.
    pub pos: u32,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Plus,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Prob,
    Expected,
    CorrelatedLoss,
    Min,
    Max,
    Abs,
}

impl Func {
    pub fn name(self) -> &'static str {
        match self {
            Func::Prob => "prob",
            Func::Expected => "expected",
            Func::CorrelatedLoss => "correlated_loss",
            Func::Min => "min",
            Func::Max => "max",
            Func::Abs => "abs",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    /// Where the expression starts.
    pub pos: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExprKind {
    Int(i64),
    Bool(bool),
    Str(String),
    /// A bare name: a field of the ADU being bound (filters only).
    Name(String),
    /// `var::field`.
    Field {
        var: Ident,
        field: Ident,
    },
    Unary(UnOp, Box<Expr>),
    Binary {
        op: BinOp,
        op_pos: u32,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Call {
        func: Func,
        args: Vec<Expr>,
    },
}
