//! The expression machinery shared by the message predicate (`--where`) and the alert rules'
//! `when`: tokens, comparison operators, `and`/`or`/`not` with parentheses, and errors that
//! name a column. What a field is, and which values it compares with, is the vocabulary's.

use std::fmt;

/// A parse error at a column (1-based, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for PredicateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for PredicateError {}

pub fn err(column: usize, message: impl Into<String>) -> PredicateError {
    PredicateError {
        column,
        message: message.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Match,
    NotMatch,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn text(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Match => "~",
            Op::NotMatch => "!~",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    pub fn negated(self) -> bool {
        matches!(self, Op::Ne | Op::NotMatch)
    }

    pub fn ordering(self) -> bool {
        matches!(self, Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }

    pub fn matching(self) -> bool {
        matches!(self, Op::Match | Op::NotMatch)
    }

    pub fn order(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Eq => o == Equal,
            Op::Ne => o != Equal,
            Op::Lt => o == Less,
            Op::Le => o != Greater,
            Op::Gt => o == Greater,
            Op::Ge => o != Less,
            Op::Match | Op::NotMatch => false,
        }
    }
}

/// A parsed expression over a vocabulary's comparisons.
#[derive(Debug, Clone)]
pub enum Expr<C> {
    And(Box<Expr<C>>, Box<Expr<C>>),
    Or(Box<Expr<C>>, Box<Expr<C>>),
    Not(Box<Expr<C>>),
    Cmp(C),
}

impl<C> Expr<C> {
    /// Evaluates with `test` deciding each comparison (short-circuit, left to right).
    pub fn eval(&self, test: &mut impl FnMut(&C) -> bool) -> bool {
        match self {
            Expr::And(a, b) => a.eval(test) && b.eval(test),
            Expr::Or(a, b) => a.eval(test) || b.eval(test),
            Expr::Not(a) => !a.eval(test),
            Expr::Cmp(c) => test(c),
        }
    }

    /// Every comparison, in source order.
    pub fn comparisons(&self) -> Vec<&C> {
        match self {
            Expr::And(a, b) | Expr::Or(a, b) => {
                let mut v = a.comparisons();
                v.extend(b.comparisons());
                v
            }
            Expr::Not(a) => a.comparisons(),
            Expr::Cmp(c) => vec![c],
        }
    }
}

/// What the fields of one language are and what each compares with.
pub trait Vocabulary {
    type Field;
    type Cmp;
    /// The field list for "unknown field" and "expected a field" errors.
    fn fields(&self) -> &'static str;
    fn field(&self, word: &str, col: usize) -> Result<Self::Field, PredicateError>;
    fn compare(
        &self,
        field: Self::Field,
        word: &str,
        op: Op,
        value: &Token,
    ) -> Result<Self::Cmp, PredicateError>;
    /// A field that may stand alone (a flag such as `unreachable`); `None` asks for an operator.
    fn alone(&self, _field: &Self::Field) -> Option<Self::Cmp> {
        None
    }
}

// ---- lexer ----

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Word(String),
    Str(String),
    Num(f64),
    /// Milliseconds.
    Duration(i64),
    Op(Op),
    LParen,
    RParen,
}

impl Tok {
    pub fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("{w:?}"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Num(n) => format!("number {n}"),
            Tok::Duration(_) => "a duration".to_string(),
            Tok::Op(o) => format!("operator {:?}", o.text()),
            Tok::LParen => "\"(\"".to_string(),
            Tok::RParen => "\")\"".to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Token {
    pub kind: Tok,
    pub col: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '$' | '/')
}

fn lex(text: &str) -> Result<Vec<Token>, PredicateError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if let Some((op, n)) = operator_at(&chars, i) {
            out.push(Token {
                kind: Tok::Op(op),
                col,
            });
            i += n;
            continue;
        }
        let (kind, next) = match c {
            '(' => (Tok::LParen, i + 1),
            ')' => (Tok::RParen, i + 1),
            '"' | '\'' => {
                let (s, next) = string_at(&chars, i)?;
                (Tok::Str(s), next)
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                number_at(&chars, i)?
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut end = i;
                while end < chars.len() && is_word_char(chars[end]) {
                    end += 1;
                }
                (Tok::Word(chars[i..end].iter().collect()), end)
            }
            other => return Err(err(col, format!("unexpected character {other:?}"))),
        };
        out.push(Token { kind, col });
        i = next;
    }
    Ok(out)
}

/// The operator at `chars[i]` and its length in characters.
fn operator_at(chars: &[char], i: usize) -> Option<(Op, usize)> {
    let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
    match two.as_str() {
        "!=" => Some((Op::Ne, 2)),
        "!~" => Some((Op::NotMatch, 2)),
        "<=" => Some((Op::Le, 2)),
        ">=" => Some((Op::Ge, 2)),
        "==" => Some((Op::Eq, 2)),
        _ => match chars[i] {
            '=' => Some((Op::Eq, 1)),
            '~' => Some((Op::Match, 1)),
            '<' => Some((Op::Lt, 1)),
            '>' => Some((Op::Gt, 1)),
            _ => None,
        },
    }
}

/// The string quoted at `chars[start]` (a backslash escapes the quote and itself), and the
/// index past its closing quote.
fn string_at(chars: &[char], start: usize) -> Result<(String, usize), PredicateError> {
    let quote = chars[start];
    let mut s = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => return Err(err(start + 1, "string is not closed")),
            Some('\\') if matches!(chars.get(i + 1), Some(&q) if q == quote || q == '\\') => {
                s.push(chars[i + 1]);
                i += 2;
            }
            Some(&q) if q == quote => return Ok((s, i + 1)),
            Some(&ch) => {
                s.push(ch);
                i += 1;
            }
        }
    }
}

/// The number at `chars[start]`, a duration when a unit follows it, and the index past it.
fn number_at(chars: &[char], start: usize) -> Result<(Tok, usize), PredicateError> {
    let col = start + 1;
    let mut i = start + 1;
    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
        i += 1;
    }
    let num: String = chars[start..i].iter().collect();
    let ustart = i;
    while i < chars.len() && chars[i].is_ascii_alphabetic() {
        i += 1;
    }
    let unit: String = chars[ustart..i].iter().collect();
    let n: f64 = num
        .parse()
        .map_err(|_| err(col, format!("{num:?} is not a number")))?;
    if unit.is_empty() {
        return Ok((Tok::Num(n), i));
    }
    let per = match unit.as_str() {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => {
            return Err(err(
                ustart + 1,
                format!("unknown unit {unit:?} (use ms, s, m, h or d)"),
            ))
        }
    };
    Ok((Tok::Duration((n * per).round() as i64), i))
}

/// A duration as the expressions write it (`90s`, `5m`, `1.5h`), in milliseconds.
pub fn duration_ms(text: &str) -> Option<i64> {
    match lex(text).ok()?.as_slice() {
        [Token {
            kind: Tok::Duration(ms),
            ..
        }] if *ms >= 0 => Some(*ms),
        _ => None,
    }
}

// ---- parser ----

/// Parses `text` in the vocabulary `v`.
pub fn parse<V: Vocabulary>(text: &str, v: &V) -> Result<Expr<V::Cmp>, PredicateError> {
    let tokens = lex(text)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        end: text.chars().count() + 1,
        v,
    };
    let expr = p.or()?;
    if let Some(t) = p.peek() {
        return Err(err(t.col, format!("unexpected {}", t.kind.describe())));
    }
    Ok(expr)
}

struct Parser<'a, V> {
    tokens: Vec<Token>,
    pos: usize,
    /// Column just past the end, for "expected … at the end".
    end: usize,
    v: &'a V,
}

fn is_keyword(t: &Token, k: &str) -> bool {
    matches!(&t.kind, Tok::Word(w) if w.eq_ignore_ascii_case(k))
}

impl<V: Vocabulary> Parser<'_, V> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self, what: &str) -> Result<Token, PredicateError> {
        let t = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or_else(|| err(self.end, format!("expected {what} at the end")))?;
        self.pos += 1;
        Ok(t)
    }

    fn eat_keyword(&mut self, k: &str) -> bool {
        if self.peek().is_some_and(|t| is_keyword(t, k)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr<V::Cmp>, PredicateError> {
        let mut e = self.and()?;
        while self.eat_keyword("or") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr<V::Cmp>, PredicateError> {
        let mut e = self.unary()?;
        while self.eat_keyword("and") {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr<V::Cmp>, PredicateError> {
        if self.eat_keyword("not") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.peek().is_some_and(|t| t.kind == Tok::LParen) {
            let open = self.next("(")?;
            let e = self.or()?;
            match self.peek() {
                Some(t) if t.kind == Tok::RParen => {
                    self.pos += 1;
                    Ok(e)
                }
                Some(t) => Err(err(
                    t.col,
                    format!("expected \")\" but found {}", t.kind.describe()),
                )),
                None => Err(err(open.col, "this \"(\" is not closed")),
            }
        } else {
            self.comparison()
        }
    }

    fn comparison(&mut self) -> Result<Expr<V::Cmp>, PredicateError> {
        let t = self.next("a field")?;
        let Tok::Word(word) = &t.kind else {
            return Err(err(
                t.col,
                format!(
                    "expected a field ({}) but found {}",
                    self.v.fields(),
                    t.kind.describe()
                ),
            ));
        };
        let field = self.v.field(word, t.col)?;
        let follows_op = matches!(
            self.peek(),
            Some(Token {
                kind: Tok::Op(_),
                ..
            })
        );
        if !follows_op {
            if let Some(c) = self.v.alone(&field) {
                return Ok(Expr::Cmp(c));
            }
        }
        let o = self.next("an operator")?;
        let Tok::Op(op) = o.kind else {
            return Err(err(
                o.col,
                format!(
                    "expected an operator (= != ~ !~ < <= > >=) after {word:?} but found {}",
                    o.kind.describe()
                ),
            ));
        };
        let v = self.next("a value")?;
        Ok(Expr::Cmp(self.v.compare(field, word, op, &v)?))
    }
}
