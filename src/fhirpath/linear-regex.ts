// A regular-expression engine whose work is linear in the input, for patterns that arrive in requests
// (FHIRPath `matches()` and `replaceMatches()`). JavaScript's RegExp backtracks: `(a+)+$` on 28 `a` and a
// `!` takes seconds and doubles with each character, blocking the event loop. This is a Pike VM
// (https://swtch.com/~rsc/regexp/regexp2.html, the design of RE2): the pattern becomes a program, and every
// thread of it advances one character at a time, at most one thread per instruction, so a search costs
// at most (input length + 1) x (program size) steps whatever the pattern. Every step is charged to a budget
// that throws when spent, so even that product is bounded.
//
// Syntax: JavaScript's without flags (code units, `.` stops at line ends, `^`/`$` at the ends of the
// input), less what is not regular: backreferences and lookaround are refused, as are `\p{...}` and
// escapes of letters JavaScript gives no meaning. Counted repetition is expanded, so its size is bounded.
// Whether a pattern matches, and where its leftmost match starts, are always JavaScript's; which match is
// chosen there (and so the groups) can differ in one corner: JavaScript rejects an optional round of a loop
// that matches the empty string, this engine takes it (/(\b|a){1,2}/ on "a": JavaScript "a", here "").
// Groups inside a loop keep their last value instead of being reset at each round.

/** A pattern this engine will not run: not regular, not understood, or too large. */
export class UnsupportedPattern extends Error {}

/** Charged one unit per VM step; throws when the caller's allowance is spent. */
export interface StepBudget {
  spend(steps: number): void;
}

/** Instructions a pattern may compile to: `(x{1000}){1000}` would otherwise be a million. */
export const MAX_PROGRAM_SIZE = 10_000;
const MAX_REPEAT = 1000;
/** Capture groups: every thread carries a copy of their offsets, so they multiply its memory and work. */
export const MAX_GROUPS = 100;
const MAX_NESTING = 64;

type CharTest = (c: number) => boolean;
type AssertKind = 'bol' | 'eol' | 'word' | 'not-word';

type Node =
  | { k: 'empty' }
  | { k: 'char'; test: CharTest }
  | { k: 'cat'; items: Node[] }
  | { k: 'alt'; items: Node[] }
  | { k: 'group'; capture?: number; body: Node }
  | { k: 'repeat'; body: Node; min: number; max: number; greedy: boolean }
  | { k: 'assert'; kind: AssertKind };

const isWord: CharTest = (c) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const isDigit: CharTest = (c) => c >= 48 && c <= 57;
// ECMAScript WhiteSpace and LineTerminator, what `\s` matches.
const isSpace: CharTest = (c) =>
  (c >= 9 && c <= 13) ||
  c === 32 ||
  c === 0xa0 ||
  c === 0x1680 ||
  (c >= 0x2000 && c <= 0x200a) ||
  c === 0x2028 ||
  c === 0x2029 ||
  c === 0x202f ||
  c === 0x205f ||
  c === 0x3000 ||
  c === 0xfeff;
const isLineEnd: CharTest = (c) => c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
const not =
  (test: CharTest): CharTest =>
  (c) =>
    !test(c);
const CLASS_ESCAPES: Record<string, CharTest> = {
  d: isDigit,
  D: not(isDigit),
  w: isWord,
  W: not(isWord),
  s: isSpace,
  S: not(isSpace),
};
const CONTROL_ESCAPES: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11 };

class Parser {
  private pos = 0;
  private depth = 0;
  groups = 0;
  readonly names = new Map<string, number>();

  constructor(private readonly source: string) {}

  parse(): Node {
    const node = this.alternation();
    if (this.pos < this.source.length) this.fail(`unbalanced ")" at ${this.pos}`);
    return node;
  }

  private fail(message: string): never {
    throw new UnsupportedPattern(message);
  }

  private peek(offset = 0): string | undefined {
    return this.source[this.pos + offset];
  }

  private alternation(): Node {
    if (++this.depth > MAX_NESTING) this.fail(`groups nested deeper than ${MAX_NESTING}`);
    const items = [this.sequence()];
    while (this.peek() === '|') {
      this.pos++;
      items.push(this.sequence());
    }
    this.depth--;
    return items.length === 1 ? items[0] : { k: 'alt', items };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.pos < this.source.length && this.peek() !== '|' && this.peek() !== ')') items.push(this.quantified());
    return items.length === 1 ? items[0] : items.length === 0 ? { k: 'empty' } : { k: 'cat', items };
  }

  /** `{n}`, `{n,}`, `{n,m}` at the current position, or undefined when the brace is a literal (Annex B). */
  private braces(): { min: number; max: number; length: number } | undefined {
    const match = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.pos, this.pos + 24));
    if (!match) return undefined;
    const min = Number(match[1]);
    const max = match[2] === undefined ? min : match[3] === '' ? Infinity : Number(match[3]);
    return { min, max, length: match[0].length };
  }

  private quantified(): Node {
    const atom = this.atom();
    let min: number;
    let max: number;
    const c = this.peek();
    if (c === '*') [min, max] = [0, Infinity];
    else if (c === '+') [min, max] = [1, Infinity];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{' && this.braces()) {
      const b = this.braces()!;
      [min, max] = [b.min, b.max];
      this.pos += b.length - 1;
    } else return atom;
    this.pos++;
    if (atom.k === 'assert') this.fail('nothing to repeat: a quantifier after an anchor');
    if (min > MAX_REPEAT || (max !== Infinity && max > MAX_REPEAT)) this.fail(`a repetition count above ${MAX_REPEAT}`);
    if (min > max) this.fail('numbers out of order in a {} quantifier');
    let greedy = true;
    if (this.peek() === '?') {
      greedy = false;
      this.pos++;
    }
    const next = this.peek();
    if (next === '*' || next === '+' || next === '?' || (next === '{' && this.braces()))
      this.fail('nothing to repeat: two quantifiers in a row');
    return { k: 'repeat', body: atom, min, max, greedy };
  }

  private atom(): Node {
    const c = this.source[this.pos++];
    switch (c) {
      case '(':
        return this.group();
      case '[':
        return this.charClass();
      case '.':
        return { k: 'char', test: not(isLineEnd) };
      case '^':
        return { k: 'assert', kind: 'bol' };
      case '$':
        return { k: 'assert', kind: 'eol' };
      case '\\':
        return this.escape();
      case '*':
      case '+':
      case '?':
        return this.fail(`nothing to repeat at ${this.pos - 1}`);
      case '{':
        this.pos--;
        if (this.braces()) this.fail(`nothing to repeat at ${this.pos}`);
        this.pos++;
        return literal(c.charCodeAt(0));
      default:
        return literal(c.charCodeAt(0));
    }
  }

  private group(): Node {
    let capture: number | undefined;
    if (this.peek() === '?') {
      const kind = this.peek(1);
      if (kind === ':') this.pos += 2;
      else if (kind === '=' || kind === '!' || (kind === '<' && (this.peek(2) === '=' || this.peek(2) === '!')))
        this.fail('lookahead and lookbehind are not supported');
      else if (kind === '<') {
        const match = /^\?<([A-Za-z_$][A-Za-z0-9_$]*)>/.exec(this.source.slice(this.pos));
        if (!match) this.fail('an invalid group name');
        if (this.names.has(match[1])) this.fail(`the group name "${match[1]}" is used twice`);
        capture = ++this.groups;
        this.names.set(match[1], capture);
        this.pos += match[0].length;
      } else this.fail('an invalid group');
    } else capture = ++this.groups;
    if (this.groups > MAX_GROUPS) this.fail(`more than ${MAX_GROUPS} capture groups`);
    const body = this.alternation();
    if (this.source[this.pos++] !== ')') this.fail('an unterminated group');
    return { k: 'group', capture, body };
  }

  /** One escape outside a class. */
  private escape(): Node {
    const c = this.source[this.pos];
    if (c === undefined) this.fail('a "\\" at the end of the pattern');
    if (c === 'b' || c === 'B') {
      this.pos++;
      return { k: 'assert', kind: c === 'b' ? 'word' : 'not-word' };
    }
    if (CLASS_ESCAPES[c]) {
      this.pos++;
      return { k: 'char', test: CLASS_ESCAPES[c] };
    }
    return literal(this.escapedCodeUnit());
  }

  /** The code unit an escape (after its backslash) stands for; refuses backreferences and unknown letters. */
  private escapedCodeUnit(inClass = false): number {
    const c = this.source[this.pos++];
    if (c === undefined) this.fail('a "\\" at the end of the pattern');
    if (c in CONTROL_ESCAPES) return CONTROL_ESCAPES[c];
    if (c === '0' && !isDigit(this.source.charCodeAt(this.pos))) return 0;
    if (isDigit(c.charCodeAt(0))) this.fail(`backreferences (\\${c}) are not supported`);
    if (c === 'k') this.fail('backreferences (\\k) are not supported');
    if (inClass && c === 'b') return 8;
    if (c === 'x' || c === 'u') {
      const digits = this.source.slice(this.pos, this.pos + (c === 'x' ? 2 : 4));
      if (!/^[0-9A-Fa-f]+$/.test(digits) || digits.length !== (c === 'x' ? 2 : 4))
        this.fail(`a malformed \\${c} escape`);
      this.pos += digits.length;
      return parseInt(digits, 16);
    }
    if (c === 'c' && /^[A-Za-z]$/.test(this.source[this.pos] ?? '')) return this.source.charCodeAt(this.pos++) % 32;
    if (/^[A-Za-z0-9]$/.test(c)) this.fail(`the escape \\${c} is not supported`);
    return c.charCodeAt(0);
  }

  private charClass(): Node {
    let negate = false;
    if (this.peek() === '^') {
      negate = true;
      this.pos++;
    }
    const ranges: [number, number][] = [];
    const tests: CharTest[] = [];
    // One member: a code unit, or a class escape such as \d (which cannot bound a range).
    const member = (): number | CharTest => {
      const c = this.source[this.pos++];
      if (c !== '\\') return c.charCodeAt(0);
      const e = this.source[this.pos];
      if (e !== undefined && CLASS_ESCAPES[e]) {
        this.pos++;
        return CLASS_ESCAPES[e];
      }
      return this.escapedCodeUnit(true);
    };
    for (;;) {
      if (this.pos >= this.source.length) this.fail('an unterminated character class');
      if (this.peek() === ']') {
        this.pos++;
        break;
      }
      const from = member();
      if (this.peek() === '-' && this.peek(1) !== ']' && this.peek(1) !== undefined) {
        this.pos++;
        const to = member();
        if (typeof from !== 'number' || typeof to !== 'number') {
          // Annex B: a class escape beside "-" makes both and the "-" literal members.
          for (const m of [from, to, 45]) {
            if (typeof m === 'number') ranges.push([m, m]);
            else tests.push(m);
          }
          continue;
        }
        if (from > to) this.fail('a character class range out of order');
        ranges.push([from, to]);
      } else if (typeof from === 'number') ranges.push([from, from]);
      else tests.push(from);
    }
    const test: CharTest = (c) => {
      for (const [lo, hi] of ranges) if (c >= lo && c <= hi) return true;
      for (const t of tests) if (t(c)) return true;
      return false;
    };
    return { k: 'char', test: negate ? not(test) : test };
  }
}

function literal(code: number): Node {
  return { k: 'char', test: (c) => c === code };
}

/** Instructions the node compiles to, computed before compiling so that a huge expansion is never built. */
function programSize(node: Node): number {
  switch (node.k) {
    case 'empty':
      return 0;
    case 'char':
    case 'assert':
      return 1;
    case 'cat':
      return node.items.reduce((sum, item) => sum + programSize(item), 0);
    case 'alt':
      return node.items.reduce((sum, item) => sum + programSize(item) + 2, 0);
    case 'group':
      return programSize(node.body) + 2;
    case 'repeat': {
      const body = programSize(node.body);
      const optional = node.max === Infinity ? body + 2 : (node.max - node.min) * (body + 1);
      return Math.min(body * node.min + optional, Number.MAX_SAFE_INTEGER);
    }
  }
}

type Instruction =
  | { op: 'char'; test: CharTest }
  | { op: 'split'; x: number; y: number }
  | { op: 'jmp'; x: number }
  | { op: 'save'; slot: number }
  | { op: 'assert'; kind: AssertKind }
  | { op: 'match' };

function compile(node: Node, program: Instruction[]): void {
  switch (node.k) {
    case 'empty':
      return;
    case 'char':
      program.push({ op: 'char', test: node.test });
      return;
    case 'assert':
      program.push({ op: 'assert', kind: node.kind });
      return;
    case 'cat':
      for (const item of node.items) compile(item, program);
      return;
    case 'alt': {
      const jumps: { op: 'jmp'; x: number }[] = [];
      node.items.forEach((item, i) => {
        if (i < node.items.length - 1) {
          const split = { op: 'split' as const, x: program.length + 1, y: 0 };
          program.push(split);
          compile(item, program);
          const jump = { op: 'jmp' as const, x: 0 };
          program.push(jump);
          jumps.push(jump);
          split.y = program.length;
        } else compile(item, program);
      });
      for (const jump of jumps) jump.x = program.length;
      return;
    }
    case 'group':
      if (node.capture !== undefined) program.push({ op: 'save', slot: node.capture * 2 });
      compile(node.body, program);
      if (node.capture !== undefined) program.push({ op: 'save', slot: node.capture * 2 + 1 });
      return;
    case 'repeat': {
      for (let i = 0; i < node.min; i++) compile(node.body, program);
      const branch = (split: { op: 'split'; x: number; y: number }, body: number, exit: number) => {
        // Greedy prefers another round; lazy prefers leaving.
        split.x = node.greedy ? body : exit;
        split.y = node.greedy ? exit : body;
      };
      if (node.max === Infinity) {
        const loop = program.length;
        const split = { op: 'split' as const, x: 0, y: 0 };
        program.push(split);
        compile(node.body, program);
        program.push({ op: 'jmp', x: loop });
        branch(split, loop + 1, program.length);
      } else {
        const splits: { split: { op: 'split'; x: number; y: number }; body: number }[] = [];
        for (let i = node.min; i < node.max; i++) {
          const split = { op: 'split' as const, x: 0, y: 0 };
          program.push(split);
          splits.push({ split, body: program.length });
          compile(node.body, program);
        }
        for (const { split, body } of splits) branch(split, body, program.length);
      }
      return;
    }
  }
}

export class LinearRegex {
  private readonly program: Instruction[] = [];
  /** Capture groups, not counting the whole match. */
  readonly groupCount: number;
  readonly groupNames: ReadonlyMap<string, number>;

  constructor(readonly source: string) {
    const parser = new Parser(source);
    const tree = parser.parse();
    const size = programSize(tree);
    if (size > MAX_PROGRAM_SIZE)
      throw new UnsupportedPattern(`it expands to ${size} instructions, more than ${MAX_PROGRAM_SIZE}`);
    compile({ k: 'group', capture: 0, body: tree }, this.program);
    this.program.push({ op: 'match' });
    this.groupCount = parser.groups;
    this.groupNames = parser.names;
  }

  /**
   * The leftmost match at or after `from` (JavaScript's choice among matches there: leftmost-first, greedy or
   * lazy as written), as [start, end] offsets per group (-1 for a group that took no part), or null.
   */
  exec(input: string, from: number, budget: StepBudget): number[] | null {
    const program = this.program;
    const slots = (this.groupCount + 1) * 2;
    const marks = new Int32Array(program.length).fill(-1);
    let current: { pc: number; caps: number[] }[] = [];
    let next: { pc: number; caps: number[] }[] = [];
    let matched: number[] | null = null;
    const stack: { pc: number; caps: number[] }[] = [];

    // Follows the jumps, splits, saves and assertions from pc at position pos, in priority order, adding the
    // threads that wait on a character (or have matched) to list; each instruction at most once per position.
    const addThread = (list: typeof current, pc: number, caps: number[], pos: number) => {
      stack.push({ pc, caps });
      while (stack.length > 0) {
        const thread = stack.pop()!;
        if (marks[thread.pc] === pos) continue;
        marks[thread.pc] = pos;
        budget.spend(1);
        const ins = program[thread.pc];
        switch (ins.op) {
          case 'jmp':
            stack.push({ pc: ins.x, caps: thread.caps });
            break;
          case 'split':
            stack.push({ pc: ins.y, caps: thread.caps }, { pc: ins.x, caps: thread.caps });
            break;
          case 'save': {
            budget.spend(slots); // the copy
            const caps2 = thread.caps.slice();
            caps2[ins.slot] = pos;
            stack.push({ pc: thread.pc + 1, caps: caps2 });
            break;
          }
          case 'assert':
            if (assertionHolds(ins.kind, input, pos)) stack.push({ pc: thread.pc + 1, caps: thread.caps });
            break;
          default:
            list.push(thread);
        }
      }
    };

    for (let pos = from; pos <= input.length; pos++) {
      // A new attempt starting here has the lowest priority: an earlier start wins.
      if (matched === null) addThread(current, 0, new Array<number>(slots).fill(-1), pos);
      else if (current.length === 0) break;
      const code = pos < input.length ? input.charCodeAt(pos) : -1;
      for (const thread of current) {
        const ins = program[thread.pc];
        if (ins.op === 'match') {
          matched = thread.caps.slice();
          matched[1] = pos;
          break; // Threads after this one have lower priority.
        }
        if (ins.op === 'char' && code >= 0 && ins.test(code)) addThread(next, thread.pc + 1, thread.caps, pos + 1);
      }
      [current, next] = [next, []];
    }
    return matched;
  }
}

function assertionHolds(kind: AssertKind, input: string, pos: number): boolean {
  switch (kind) {
    case 'bol':
      return pos === 0;
    case 'eol':
      return pos === input.length;
    default: {
      const before = pos > 0 && isWord(input.charCodeAt(pos - 1));
      const after = pos < input.length && isWord(input.charCodeAt(pos));
      return (before !== after) === (kind === 'word');
    }
  }
}
