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
  return new SubsetParser(source).parse();
}

/** Recursive descent over the tokens, one method per rule of the grammar. */
class SubsetParser {
  private readonly tokens: Token[];
  private pos = 0;

  constructor(private readonly source: string) {
    this.tokens = tokenize(source);
  }

  parse(): Expr {
    const expr = this.parseBinary(0);
    if (this.peek().t !== 'end') throw new SyntaxError(`Unexpected trailing input in ${this.source}`);
    return expr;
  }

  private peek(): Token {
    return this.tokens[this.pos];
  }

  private isOp(v: string): boolean {
    const t = this.peek();
    return (t.t === 'op' || t.t === 'id') && t.v === v;
  }

  private expect(v: string): void {
    if (!this.isOp(v)) throw new SyntaxError(`Expected "${v}" in ${this.source}`);
    this.pos++;
  }

  private parseBinary(level: number): Expr {
    if (level >= BINARY_LEVELS.length) return this.parseTypeExpr();
    let left = this.parseBinary(level + 1);
    for (;;) {
      const op = BINARY_LEVELS[level].find((o) => this.isOp(o));
      if (!op) return left;
      this.pos++;
      const right = this.parseBinary(level + 1);
      left = { kind: 'binary', op: op as '|' | '=' | '!=' | 'and' | 'or', left, right };
    }
  }

  private parseTypeExpr(): Expr {
    let target = this.parsePostfix();
    while (this.isOp('as') || this.isOp('is')) {
      const op = (this.peek() as { v: string }).v as 'as' | 'is';
      this.pos++;
      const typeName = this.parseTypeName();
      target = { kind: 'type', op, target, typeName };
    }
    return target;
  }

  private parseTypeName(): string {
    const t = this.peek();
    if (t.t !== 'id') throw new SyntaxError(`Expected a type name in ${this.source}`);
    this.pos++;
    let name = t.v;
    // Qualified names (FHIR.Patient, System.String): keep the last part.
    while (this.isOp('.') && this.tokens[this.pos + 1].t === 'id') {
      this.pos++;
      name = (this.tokens[this.pos] as { v: string }).v;
      this.pos++;
    }
    return name;
  }

  private parseArgs(name: string): Expr[] {
    this.expect('(');
    const args: Expr[] = [];
    if (this.isOp(')')) {
      this.pos++;
      return args;
    }
    for (;;) {
      // Type-taking functions receive a bare type name.
      if (['as', 'is', 'ofType'].includes(name)) args.push({ kind: 'identifier', name: this.parseTypeName() });
      else args.push(this.parseBinary(0));
      if (this.isOp(',')) {
        this.pos++;
        continue;
      }
      this.expect(')');
      return args;
    }
  }

  private parsePrimary(): Expr {
    const t = this.peek();
    if (t.t === 'op' && t.v === '(') {
      this.pos++;
      const inner = this.parseBinary(0);
      this.expect(')');
      return inner;
    }
    if (t.t === 'str' || t.t === 'num') {
      this.pos++;
      return { kind: 'literal', value: t.v };
    }
    if (t.t === 'var') {
      this.pos++;
      return { kind: 'variable', name: t.v };
    }
    if (t.t === 'id') {
      this.pos++;
      if (t.v === 'true' || t.v === 'false') return { kind: 'literal', value: t.v === 'true' };
      if (this.isOp('(')) return { kind: 'call', target: undefined, name: t.v, args: this.parseArgs(t.v) };
      return { kind: 'identifier', name: t.v };
    }
    throw new SyntaxError(`Unexpected token in ${this.source}`);
  }

  private parsePostfix(): Expr {
    let expr = this.parsePrimary();
    for (;;) {
      if (this.isOp('.')) {
        this.pos++;
        const t = this.peek();
        if (t.t !== 'id') throw new SyntaxError(`Expected a name after "." in ${this.source}`);
        this.pos++;
        if (this.isOp('(')) expr = { kind: 'call', target: expr, name: t.v, args: this.parseArgs(t.v) };
        else expr = { kind: 'member', target: expr, name: t.v };
      } else if (this.isOp('[')) {
        this.pos++;
        const t = this.peek();
        if (t.t !== 'num') throw new SyntaxError(`Expected an index in ${this.source}`);
        this.pos++;
        this.expect(']');
        expr = { kind: 'index', target: expr, index: t.v };
      } else {
        return expr;
      }
    }
  }
}
