//! Source text to syntax tree: the pest grammar (`hose.pest`) plus a builder that
//! folds operator chains, applies resource limits and turns pest errors into
//! `line:col` diagnostics.

use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::{Pair, Pairs};
use pest::Parser as _;

use crate::ast::{
    BinOp, Binding, Expr, ExprKind, Func, Ident, Program, Section, UnOp, UtilityEntry, VarKind,
};
use crate::error::Diag;

#[derive(pest_derive::Parser)]
#[grammar = "hose.pest"]
struct HoseParser;

/// Longest program accepted (objectives are a few hundred bytes).
pub(crate) const MAX_SOURCE_BYTES: usize = 1 << 20;
/// Deepest bracket nesting accepted. The PEG parser recurses once per level, so
/// this bounds its stack use on hostile input.
pub(crate) const MAX_NESTING: usize = 64;
/// Deepest expression tree accepted (long operator chains fold into deep trees; the
/// checker and evaluator recurse over them).
pub(crate) const MAX_DEPTH: u32 = 256;

pub(crate) fn parse(src: &str) -> Result<Program, Vec<Diag>> {
    if src.len() > MAX_SOURCE_BYTES {
        return Err(vec![Diag::new(
            0,
            format!("program is longer than {MAX_SOURCE_BYTES} bytes"),
        )]);
    }
    check_nesting(src).map_err(|d| vec![d])?;
    let mut pairs =
        HoseParser::parse(Rule::program, src).map_err(|e| vec![syntax_error(src, &e)])?;
    let program = next(&mut pairs, 0)?;
    let objective = next(&mut program.into_inner(), 0)?;
    build_program(objective).map_err(|d| vec![d])
}

/// Reject bracket nesting deeper than [`MAX_NESTING`] before the recursive parser sees it.
fn check_nesting(src: &str) -> Result<(), Diag> {
    let bytes = src.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(Diag::new(
                        offset(i),
                        format!("brackets are nested more than {MAX_NESTING} deep"),
                    ));
                }
            }
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn offset(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn pos(pair: &Pair<'_, Rule>) -> u32 {
    offset(pair.as_span().start())
}

/// The next child the grammar guarantees; a missing one is reported, not unwrapped.
fn next<'i>(pairs: &mut Pairs<'i, Rule>, at: u32) -> Result<Pair<'i, Rule>, Vec<Diag>> {
    pairs
        .next()
        .ok_or_else(|| vec![Diag::new(at, "internal parser error: malformed tree")])
}

fn next1<'i>(pairs: &mut Pairs<'i, Rule>, at: u32) -> Result<Pair<'i, Rule>, Diag> {
    next(pairs, at).map_err(|mut d| d.remove(0))
}

fn build_program(objective: Pair<'_, Rule>) -> Result<Program, Diag> {
    let at = pos(&objective);
    let mut sections = Vec::new();
    for p in objective.into_inner() {
        let sp = pos(&p);
        match p.as_rule() {
            Rule::context => {
                let mut bindings = Vec::new();
                for b in p.into_inner() {
                    let kind = match b.as_rule() {
                        Rule::adu_binding => VarKind::Adu,
                        Rule::stream_binding => VarKind::Stream,
                        _ => continue,
                    };
                    let (name, filter) = named_block(b)?;
                    bindings.push(Binding { kind, name, filter });
                }
                sections.push(Section::Context { pos: sp, bindings });
            }
            Rule::goal => {
                let e = p
                    .into_inner()
                    .find(|c| c.as_rule() == Rule::expr)
                    .ok_or_else(|| Diag::new(sp, "internal parser error: goal"))?;
                sections.push(Section::Goal {
                    pos: sp,
                    expr: expr(e)?.0,
                });
            }
            Rule::utility => {
                let mut entries = Vec::new();
                for u in p.into_inner() {
                    if u.as_rule() == Rule::utility_entry {
                        let (var, expr) = named_block(u)?;
                        entries.push(UtilityEntry { var, expr });
                    }
                }
                sections.push(Section::Utility { pos: sp, entries });
            }
            _ => {}
        }
    }
    Ok(Program { pos: at, sections })
}

/// `name { expr }` inside a binding or utility entry (keywords and punctuation skipped).
fn named_block(pair: Pair<'_, Rule>) -> Result<(Ident, Expr), Diag> {
    let at = pos(&pair);
    let mut name = None;
    let mut body = None;
    for c in pair.into_inner() {
        match c.as_rule() {
            Rule::name => {
                name = Some(Ident {
                    name: c.as_str().to_string(),
                    pos: pos(&c),
                })
            }
            Rule::expr => body = Some(expr(c)?.0),
            _ => {}
        }
    }
    match (name, body) {
        (Some(n), Some(b)) => Ok((n, b)),
        _ => Err(Diag::new(at, "internal parser error: block")),
    }
}

/// Build an expression and report its tree depth.
fn expr(pair: Pair<'_, Rule>) -> Result<(Expr, u32), Diag> {
    let at = pos(&pair);
    match pair.as_rule() {
        Rule::expr | Rule::and_expr | Rule::add_expr | Rule::mul_expr => chain(pair, false),
        Rule::cmp_expr => chain(pair, true),
        Rule::unary => unary(pair),
        Rule::paren => {
            let inner = pair
                .into_inner()
                .find(|c| c.as_rule() == Rule::expr)
                .ok_or_else(|| Diag::new(at, "internal parser error: paren"))?;
            expr(inner)
        }
        Rule::call => call(pair),
        Rule::field_ref => {
            let mut it = pair.into_inner();
            let var = next1(&mut it, at)?;
            let _scope = next1(&mut it, at)?;
            let field = next1(&mut it, at)?;
            let kind = ExprKind::Field {
                var: Ident {
                    name: var.as_str().to_string(),
                    pos: pos(&var),
                },
                field: Ident {
                    name: field.as_str().to_string(),
                    pos: pos(&field),
                },
            };
            Ok((Expr { kind, pos: at }, 1))
        }
        Rule::bare_name => leaf(ExprKind::Name(pair.as_str().to_string()), at),
        Rule::bool_lit => leaf(ExprKind::Bool(pair.as_str() == "true"), at),
        Rule::int_lit => leaf(ExprKind::Int(int_literal(pair.as_str(), false, at)?), at),
        Rule::string_lit => {
            let s = pair.as_str();
            leaf(ExprKind::Str(s[1..s.len() - 1].to_string()), at)
        }
        _ => Err(Diag::new(at, "internal parser error: expression")),
    }
}

fn leaf(kind: ExprKind, at: u32) -> Result<(Expr, u32), Diag> {
    Ok((Expr { kind, pos: at }, 1))
}

fn deeper(depth: u32, at: u32) -> Result<u32, Diag> {
    if depth > MAX_DEPTH {
        Err(Diag::new(
            at,
            format!("expression is nested more than {MAX_DEPTH} levels deep"),
        ))
    } else {
        Ok(depth)
    }
}

fn int_literal(digits: &str, negative: bool, at: u32) -> Result<i64, Diag> {
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    text.parse::<i64>()
        .map_err(|_| Diag::new(at, format!("integer literal `{text}` is out of range")))
}

/// `operand (op operand)*`, folded to the left.
fn chain(pair: Pair<'_, Rule>, comparison: bool) -> Result<(Expr, u32), Diag> {
    let at = pos(&pair);
    let mut it = pair.into_inner();
    let (mut lhs, mut depth) = expr(next1(&mut it, at)?)?;
    let mut comparisons = 0;
    while let Some(op) = it.next() {
        let op_pos = pos(&op);
        let op = bin_op(op.as_str(), op_pos)?;
        if comparison {
            comparisons += 1;
            if comparisons > 1 {
                return Err(Diag::new(
                    op_pos,
                    "comparisons cannot be chained; combine them with `&&` or `||`",
                ));
            }
        }
        let (rhs, rd) = expr(next1(&mut it, op_pos)?)?;
        depth = deeper(depth.max(rd) + 1, op_pos)?;
        lhs = Expr {
            pos: lhs.pos,
            kind: ExprKind::Binary {
                op,
                op_pos,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
        };
    }
    Ok((lhs, depth))
}

fn bin_op(s: &str, at: u32) -> Result<BinOp, Diag> {
    Ok(match s {
        "||" => BinOp::Or,
        "&&" => BinOp::And,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "=" => {
            return Err(Diag::new(
                at,
                "`=` is not a hose operator; compare with `==`",
            ))
        }
        other => return Err(Diag::new(at, format!("unknown operator `{other}`"))),
    })
}

/// Prefix operators applied right to left. A `-` written directly before a number
/// is part of the literal, so the full i64 range can be written.
fn unary(pair: Pair<'_, Rule>) -> Result<(Expr, u32), Diag> {
    let at = pos(&pair);
    let mut ops = Vec::new();
    let mut operand = None;
    for c in pair.into_inner() {
        if c.as_rule() == Rule::op_prefix {
            ops.push((c.as_str(), pos(&c)));
        } else {
            operand = Some(c);
        }
    }
    let operand = operand.ok_or_else(|| Diag::new(at, "internal parser error: unary"))?;
    let (mut e, mut depth) = match (ops.last(), operand.as_rule()) {
        (Some(&("-", op_pos)), Rule::int_lit) => {
            ops.pop();
            let v = int_literal(operand.as_str(), true, op_pos)?;
            (
                Expr {
                    kind: ExprKind::Int(v),
                    pos: op_pos,
                },
                1,
            )
        }
        _ => expr(operand)?,
    };
    for (op, op_pos) in ops.into_iter().rev() {
        let op = match op {
            "-" => UnOp::Neg,
            "+" => UnOp::Plus,
            _ => UnOp::Not,
        };
        depth = deeper(depth + 1, op_pos)?;
        e = Expr {
            kind: ExprKind::Unary(op, Box::new(e)),
            pos: op_pos,
        };
    }
    Ok((e, depth))
}

fn call(pair: Pair<'_, Rule>) -> Result<(Expr, u32), Diag> {
    let at = pos(&pair);
    let mut func = None;
    let mut args = Vec::new();
    let mut depth = 0;
    for c in pair.into_inner() {
        match c.as_rule() {
            Rule::func => {
                func = Some(match c.as_str() {
                    "prob" => Func::Prob,
                    "expected" => Func::Expected,
                    "correlated_loss" => Func::CorrelatedLoss,
                    "min" => Func::Min,
                    "max" => Func::Max,
                    _ => Func::Abs,
                })
            }
            Rule::expr => {
                let (e, d) = expr(c)?;
                depth = depth.max(d);
                args.push(e);
            }
            _ => {}
        }
    }
    let func = func.ok_or_else(|| Diag::new(at, "internal parser error: call"))?;
    let depth = deeper(depth + 1, at)?;
    Ok((
        Expr {
            kind: ExprKind::Call { func, args },
            pos: at,
        },
        depth,
    ))
}

/// Turn a pest error into `syntax error: expected …, found …`.
fn syntax_error(src: &str, e: &pest::error::Error<Rule>) -> Diag {
    let at = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let message = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut wanted: Vec<(u8, &str)> = positives.iter().map(|r| describe(*r)).collect();
            wanted.sort();
            wanted.dedup();
            let names: Vec<&str> = wanted.into_iter().map(|(_, s)| s).collect();
            format!(
                "syntax error: expected {}, found {}",
                join_or(&names),
                found(src, at)
            )
        }
        ErrorVariant::CustomError { message } => format!("syntax error: {message}"),
    };
    Diag::new(offset(at), message)
}

/// A rank (for a stable order) and a human name for what the parser wanted.
fn describe(rule: Rule) -> (u8, &'static str) {
    match rule {
        Rule::kw_objective | Rule::objective | Rule::program => (0, "`objective`"),
        Rule::context | Rule::kw_context => (1, "`context`"),
        Rule::goal | Rule::kw_goal => (2, "`goal`"),
        Rule::utility | Rule::kw_utility => (3, "`utility`"),
        Rule::adu_binding | Rule::kw_adu => (4, "`adu:`"),
        Rule::stream_binding | Rule::kw_stream => (5, "`stream:`"),
        Rule::utility_entry | Rule::name => (6, "a variable name"),
        Rule::field_name => (7, "a field name"),
        Rule::op_or => (10, "`||`"),
        Rule::op_and => (11, "`&&`"),
        Rule::op_cmp => (12, "a comparison"),
        Rule::op_add => (13, "`+` or `-`"),
        Rule::op_mul => (14, "`*` or `/`"),
        Rule::lbrace => (20, "`{`"),
        Rule::rbrace => (21, "`}`"),
        Rule::lparen => (22, "`(`"),
        Rule::rparen => (23, "`)`"),
        Rule::comma => (24, "`,`"),
        Rule::colon => (25, "`:`"),
        Rule::scope => (26, "`::`"),
        Rule::EOI => (30, "end of input"),
        _ => (8, "an expression"),
    }
}

fn join_or(items: &[&str]) -> String {
    match items {
        [] => "something else".to_string(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    }
}

/// The token at `at`, quoted, for error messages.
fn found(src: &str, at: usize) -> String {
    let rest = src.get(at..).unwrap_or("");
    let Some(first) = rest.chars().next() else {
        return "end of input".to_string();
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let tok: String = if word(first) {
        rest.chars().take_while(|&c| word(c)).take(40).collect()
    } else if ["==", "!=", "<=", ">=", "&&", "||", "::"]
        .iter()
        .any(|op| rest.starts_with(op))
    {
        rest[..2].to_string()
    } else {
        first.to_string()
    };
    format!("`{}`", tok.escape_debug())
}
