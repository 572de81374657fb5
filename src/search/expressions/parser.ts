// A parser for the subset of FHIRPath (http://hl7.org/fhirpath/N1/) that the R4 SearchParameter
// expressions use: paths, `|`, `[n]`, `as`/`is`, `=`/`!=`, `and`/`or`, `%resource`, literals and
// function calls. Anything else is a SyntaxError, so the caller can fall back to a full engine.

export type Expr =
  | { kind: 'identifier'; name: string }
  | { kind: 'variable'; name: string }
  | { kind: 'literal'; value: string | number | boolean }
  | { kind: 'member'; target: Expr; name: string }
  | { kind: 'index'; target: Expr; index: number }
  | { kind: 'call'; target: Expr | undefined; name: string; args: Expr[] }
  | { kind: 'binary'; op: '|' | '=' | '!=' | 'and' | 'or'; left: Expr; right: Expr }
  | { kind: 'type'; op: 'as' | 'is'; target: Expr; typeName: string };

type Token =
  | { t: 'id'; v: string }
  | { t: 'str'; v: string }
  | { t: 'num'; v: number }
  | { t: 'var'; v: string }
  | { t: 'op'; v: string }
  | { t: 'end' };

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (/\s/.test(c)) {
      i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(source.slice(i))!;
      tokens.push({ t: 'id', v: m[0] });
      i += m[0].length;
    } else if (c === '`') {
      const end = source.indexOf('`', i + 1);
      if (end < 0) throw new SyntaxError(`Unterminated identifier in ${source}`);
      tokens.push({ t: 'id', v: source.slice(i + 1, end) });
      i = end + 1;
    } else if (c === "'") {
      let value = '';
      i++;
      while (i < source.length && source[i] !== "'") {
        if (source[i] === '\\') {
          value += source[i + 1];
          i += 2;
        } else value += source[i++];
      }
      if (i >= source.length) throw new SyntaxError(`Unterminated string in ${source}`);
      i++;
      tokens.push({ t: 'str', v: value });
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9]+(\.[0-9]+)?/.exec(source.slice(i))!;
      tokens.push({ t: 'num', v: Number(m[0]) });
      i += m[0].length;
    } else if (c === '%') {
      const m = /^%([A-Za-z_][A-Za-z0-9_]*)/.exec(source.slice(i));
      if (!m) throw new SyntaxError(`Bad variable in ${source}`);
      tokens.push({ t: 'var', v: m[1] });
      i += m[0].length;
    } else if (source.startsWith('!=', i)) {
      tokens.push({ t: 'op', v: '!=' });
      i += 2;
    } else if ('.()[],|='.includes(c)) {
      tokens.push({ t: 'op', v: c });
      i++;
    } else {
      throw new SyntaxError(`Unsupported character "${c}" in ${source}`);
    }
  }
  tokens.push({ t: 'end' });
  return tokens;
}

// Precedence, lowest first (FHIRPath §Operator precedence): or, and, = !=, |, is/as.
const BINARY_LEVELS: readonly (readonly string[])[] = [['or'], ['and'], ['=', '!='], ['|']];

export function parseFhirPathSubset(source: string): Expr {
  const tokens = tokenize(source);
  let pos = 0;
  const peek = (): Token => tokens[pos];
  const isOp = (v: string): boolean => {
    const t = peek();
    return (t.t === 'op' || t.t === 'id') && t.v === v;
  };
  const expect = (v: string): void => {
    if (!isOp(v)) throw new SyntaxError(`Expected "${v}" in ${source}`);
    pos++;
  };

  const parseBinary = (level: number): Expr => {
    if (level >= BINARY_LEVELS.length) return parseTypeExpr();
    let left = parseBinary(level + 1);
    for (;;) {
      const op = BINARY_LEVELS[level].find((o) => isOp(o));
      if (!op) return left;
      pos++;
      const right = parseBinary(level + 1);
      left = { kind: 'binary', op: op as '|' | '=' | '!=' | 'and' | 'or', left, right };
    }
  };

  const parseTypeExpr = (): Expr => {
    let target = parsePostfix();
    while (isOp('as') || isOp('is')) {
      const op = (peek() as { v: string }).v as 'as' | 'is';
      pos++;
      const typeName = parseTypeName();
      target = { kind: 'type', op, target, typeName };
    }
    return target;
  };

  const parseTypeName = (): string => {
    const t = peek();
    if (t.t !== 'id') throw new SyntaxError(`Expected a type name in ${source}`);
    pos++;
    let name = t.v;
    // Qualified names (FHIR.Patient, System.String): keep the last part.
    while (isOp('.') && tokens[pos + 1].t === 'id') {
      pos++;
      name = (tokens[pos] as { v: string }).v;
      pos++;
    }
    return name;
  };

  const parseArgs = (name: string): Expr[] => {
    expect('(');
    const args: Expr[] = [];
    if (isOp(')')) {
      pos++;
      return args;
    }
    for (;;) {
      // Type-taking functions receive a bare type name.
      if (['as', 'is', 'ofType'].includes(name)) args.push({ kind: 'identifier', name: parseTypeName() });
      else args.push(parseBinary(0));
      if (isOp(',')) {
        pos++;
        continue;
      }
      expect(')');
      return args;
    }
  };

  const parsePrimary = (): Expr => {
    const t = peek();
    if (t.t === 'op' && t.v === '(') {
      pos++;
      const inner = parseBinary(0);
      expect(')');
      return inner;
    }
    if (t.t === 'str' || t.t === 'num') {
      pos++;
      return { kind: 'literal', value: t.v };
    }
    if (t.t === 'var') {
      pos++;
      return { kind: 'variable', name: t.v };
    }
    if (t.t === 'id') {
      pos++;
      if (t.v === 'true' || t.v === 'false') return { kind: 'literal', value: t.v === 'true' };
      if (isOp('(')) return { kind: 'call', target: undefined, name: t.v, args: parseArgs(t.v) };
      return { kind: 'identifier', name: t.v };
    }
    throw new SyntaxError(`Unexpected token in ${source}`);
  };

  const parsePostfix = (): Expr => {
    let expr = parsePrimary();
    for (;;) {
      if (isOp('.')) {
        pos++;
        const t = peek();
        if (t.t !== 'id') throw new SyntaxError(`Expected a name after "." in ${source}`);
        pos++;
        if (isOp('(')) expr = { kind: 'call', target: expr, name: t.v, args: parseArgs(t.v) };
        else expr = { kind: 'member', target: expr, name: t.v };
      } else if (isOp('[')) {
        pos++;
        const t = peek();
        if (t.t !== 'num') throw new SyntaxError(`Expected an index in ${source}`);
        pos++;
        expect(']');
        expr = { kind: 'index', target: expr, index: t.v };
      } else {
        return expr;
      }
    }
  };

  const expr = parseBinary(0);
  if (peek().t !== 'end') throw new SyntaxError(`Unexpected trailing input in ${source}`);
  return expr;
}
