//! TypeScript to JavaScript: types stripped by `oxc_transformer`, and a position map back to the
//! file as written, so an exception thrown at line 12 of the output is reported at the line the
//! author wrote. All oxc use of this crate lives here.

use std::path::Path;

use oxc_allocator::Allocator;
use oxc_codegen::{Codegen, CodegenOptions};
use oxc_parser::Parser;
use oxc_semantic::SemanticBuilder;
use oxc_span::SourceType;
use oxc_transformer::{TransformOptions, Transformer};

/// A module's code as the engine runs it, and how to find a position of it in the original.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stripped {
    /// The JavaScript.
    pub(crate) code: String,
    /// `(generated line, generated column, original line, original column)`, 0-based, sorted.
    /// Empty when the code is the original (a `.js` file).
    points: Vec<(u32, u32, u32, u32)>,
}

impl Stripped {
    /// JavaScript as written: nothing to strip, positions are the original's.
    pub(crate) fn plain(code: String) -> Self {
        Stripped {
            code,
            points: Vec::new(),
        }
    }

    /// The original 1-based line and column of the generated 1-based `line`, `column`.
    pub(crate) fn original(&self, line: u32, column: u32) -> (u32, u32) {
        if self.points.is_empty() {
            return (line, column);
        }
        let (l, c) = (line.saturating_sub(1), column.saturating_sub(1));
        // The last mapped point at or before the position on its line, else the line's first.
        let after = self.points.partition_point(|p| (p.0, p.1) <= (l, c));
        let at = match after.checked_sub(1).map(|i| self.points[i]) {
            Some(p) if p.0 == l => Some(p),
            _ => self.points.get(after).filter(|p| p.0 == l).copied(),
        };
        match at {
            Some((_, dc, sl, sc)) => (sl + 1, sc + c.saturating_sub(dc) + 1),
            None => (line, column),
        }
    }
}

/// TypeScript modules larger than this are refused (as definitions are, `duet-spec`'s `ts.rs`):
/// oxc's passes recurse once per nested expression, so the size bounds the depth.
const MAX_TS_BYTES: usize = 256 << 10;
/// The stack oxc's passes run on: reserved, not committed, so it costs nothing unless a file
/// needs it.
const STRIP_STACK: usize = 512 << 20;

/// Modules up to this size are stripped on the calling thread (the evaluation's, 64 MiB): their
/// nesting is bounded by their size, and a thread of its own costs each file ~0.2 ms.
const SMALL: usize = 8 << 10;

type Refused = (String, Option<(u32, u32)>);

impl Stripped {
    /// The original 1-based line and character column of what the engine reports as `line`,
    /// `byte_column` (QuickJS counts a column in bytes of the code it ran); `source` is the
    /// file as written, when known (a source map's columns are UTF-16 units).
    pub(crate) fn original_of_engine(
        &self,
        line: u32,
        byte_column: u32,
        source: Option<&str>,
    ) -> (u32, u32) {
        let ran = nth_line(&self.code, line);
        if self.points.is_empty() {
            return (
                line,
                ran.map_or(byte_column, |t| char_column(t, byte_column)),
            );
        }
        let unit_column = ran.map_or(byte_column, |t| utf16_column(t, byte_column));
        let (l, c) = self.original(line, unit_column);
        let written = source.and_then(|s| nth_line(s, l));
        (l, written.map_or(c, |t| char_column_of_utf16(t, c)))
    }
}

/// Line `n` (1-based) of `text`.
fn nth_line(text: &str, n: u32) -> Option<&str> {
    text.lines().nth(usize::try_from(n).ok()?.checked_sub(1)?)
}

/// The 1-based character column of the 1-based byte column `byte` of `line`.
fn char_column(line: &str, byte: u32) -> u32 {
    let b = usize::try_from(byte.saturating_sub(1)).unwrap_or(usize::MAX);
    let count = line.char_indices().take_while(|(i, _)| *i < b).count();
    u32::try_from(count + 1).unwrap_or(u32::MAX)
}

/// The 1-based UTF-16 column of the 1-based byte column `byte` of `line`.
fn utf16_column(line: &str, byte: u32) -> u32 {
    let b = usize::try_from(byte.saturating_sub(1)).unwrap_or(usize::MAX);
    let units: usize = line
        .char_indices()
        .take_while(|(i, _)| *i < b)
        .map(|(_, c)| c.len_utf16())
        .sum();
    u32::try_from(units + 1).unwrap_or(u32::MAX)
}

/// The 1-based character column of the 1-based UTF-16 column `unit` of `line`.
fn char_column_of_utf16(line: &str, unit: u32) -> u32 {
    let target = usize::try_from(unit.saturating_sub(1)).unwrap_or(usize::MAX);
    let mut units = 0;
    let mut chars = 0;
    for c in line.chars() {
        if units >= target {
            break;
        }
        units += c.len_utf16();
        chars += 1;
    }
    u32::try_from(chars + 1).unwrap_or(u32::MAX)
}

/// Strips the types of `text`, the TypeScript file `path`; `Err` is the parser's or the
/// transformer's first message, with its 1-based line and column.
pub(crate) fn strip(path: &str, text: &str) -> Result<Stripped, Refused> {
    if text.len() > MAX_TS_BYTES {
        return Err((
            format!(
                "a TypeScript module may be at most {} KiB",
                MAX_TS_BYTES >> 10
            ),
            None,
        ));
    }
    if let Some(offset) = duet_spec::too_deep(text) {
        return Err((
            "brackets nest too deeply to be a module duet evaluates".into(),
            Some(position(text, offset)),
        ));
    }
    if text.len() <= SMALL {
        return strip_here(path, text);
    }
    let outcome = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("duet-js-strip".into())
            .stack_size(STRIP_STACK)
            .spawn_scoped(scope, || strip_here(path, text))
            .map(|h| h.join())
    });
    match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err((
            "the TypeScript transformer failed on this file".into(),
            None,
        )),
        Err(e) => Err((
            format!("cannot start the TypeScript transformer: {e}"),
            None,
        )),
    }
}

fn strip_here(path: &str, text: &str) -> Result<Stripped, Refused> {
    let allocator = Allocator::default();
    let source_type = SourceType::ts().with_module(true);
    let parsed = Parser::new(&allocator, text, source_type).parse();
    if let Some(d) = parsed.diagnostics.first() {
        let at = d
            .labels
            .first()
            .map(|l| position(text, l.offset() as usize));
        return Err((d.message.to_string(), at));
    }
    if parsed.panicked {
        return Err(("the file could not be parsed".into(), None));
    }
    let mut program = parsed.program;
    let scoping = SemanticBuilder::new()
        .build(&program)
        .semantic
        .into_scoping();
    let options = TransformOptions::default();
    let transformed = Transformer::new(&allocator, Path::new(path), &options)
        .build_with_scoping(scoping, &mut program);
    if let Some(d) = transformed.diagnostics.first() {
        let at = d
            .labels
            .first()
            .map(|l| position(text, l.offset() as usize));
        return Err((d.message.to_string(), at));
    }
    let generated = Codegen::new()
        .with_options(CodegenOptions {
            source_map_path: Some(path.into()),
            ..CodegenOptions::default()
        })
        .build(&program);
    let mut points: Vec<(u32, u32, u32, u32)> = generated
        .map
        .map(|m| {
            m.get_tokens()
                .map(|t| {
                    (
                        t.get_dst_line(),
                        t.get_dst_col(),
                        t.get_src_line(),
                        t.get_src_col(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    points.sort_unstable();
    Ok(Stripped {
        code: generated.code,
        points,
    })
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
pub(crate) fn position(text: &str, offset: usize) -> (u32, u32) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[start..offset].chars().count() + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_go_and_positions_come_back() {
        let text = "type T = { a: string };\ninterface I { b: number }\nconst x: T = { a: 'x' } satisfies T;\n\nexport default (x as any) as I;\nthrow new Error('here');\n";
        let s = strip("agents/tools/t.ts", text).expect("strips");
        assert!(!s.code.contains("interface"), "{}", s.code);
        assert!(!s.code.contains("satisfies"), "{}", s.code);
        let line = s
            .code
            .lines()
            .position(|l| l.contains("throw"))
            .expect("the throw survives");
        let column = s
            .code
            .lines()
            .nth(line)
            .and_then(|l| l.find("throw"))
            .unwrap_or(0);
        let (l, c) = s.original(line as u32 + 1, column as u32 + 1);
        assert_eq!((l, c), (6, 1));
    }

    #[test]
    fn nesting_that_would_overflow_a_stack_is_refused() {
        let deep = format!(
            "export const d = {}'x'{};",
            "(".repeat(50_000),
            ")".repeat(50_000)
        );
        let err = strip("agents/lib/deep.ts", &deep).expect_err("refused");
        assert!(err.0.contains("nest too deeply"), "{err:?}");
        let chain = format!("export const d = {}1;", "- ".repeat(100_000));
        // Within the size limit, a long chain of operators is parsed on the large stack.
        let _ = strip("agents/lib/chain.ts", &chain);
    }

    #[test]
    fn engine_columns_in_bytes_become_characters() {
        let js = Stripped::plain("const s = '🎉é'; throw new Error('x');\n".into());
        // `throw` is byte 25 (🎉 is 4 bytes, é 2), character 21.
        assert_eq!(js.original_of_engine(1, 25, None), (1, 21));
        // Through the strip: the map's columns are UTF-16 units (🎉 is two), issues' characters.
        let source = "const s: string = '🎉é';\nconst t = '🎉'; throw new Error('x');\n";
        let ts = strip("t.ts", source).expect("strips");
        let (line, byte) = ts
            .code
            .lines()
            .enumerate()
            .find_map(|(i, l)| l.find("throw").map(|b| (i + 1, b + 1)))
            .expect("the throw is kept");
        let at = ts.original_of_engine(line as u32, byte as u32, Some(source));
        assert_eq!(at, (2, 16), "{}", ts.code);
    }

    #[test]
    fn syntax_errors_say_where() {
        let err = strip("x.ts", "const a = ;\n").expect_err("bad");
        assert_eq!(err.1.map(|p| p.0), Some(1));
    }
}
