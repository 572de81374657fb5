// Regular expressions that arrive in requests (FHIRPath `matches()` and `replaceMatches()`), run in time
// linear in the input. JavaScript's RegExp backtracks: `(a+)+$` on 28 `a` and a `!` takes seconds and
// doubles with each character, blocking the event loop. Matching here is re2js's (a port of RE2: DFA and
// NFA, no backtracking, so a search costs at most about (input length + 1) x (program size)). This module
// only decides which patterns reach it and what a search is charged:
//
// - Syntax is JavaScript's without flags, as medplum's own `matches()` uses (`new RegExp(pattern)`); a
//   pass over the pattern checks it and rewrites the few constructs whose meaning RE2 spells differently
//   (`.`, `\s`, `\S`, `[\b]`), then re2js's translateRegExp turns the JavaScript spellings it knows
//   (`\uXXXX`, `\cX`, `[]`, `[^]`, `(?<name>`) into RE2's.
// - Refused (UnsupportedPattern, a 400 for the client): backreferences (`\1`, `\k<name>`), lookahead and
//   lookbehind, inline flags and other `(?` groups JavaScript does not have, escapes of letters JavaScript
//   gives no meaning (`\p`, `\Q`, `\e`, ...), malformed `\x`/`\u`, groups nested deeper than 64, more than
//   100 capture groups, and patterns that would compile to more than 10,000 instructions. That last bound
//   is computed from the pattern before compiling, because re2js's own limit (about 1.4 million
//   instructions, a second and 150 MB to compile) is far above what a request may ask for; re2js itself
//   refuses counts above 1000 and nested counts whose product is above 1000 (`a{1000}{1000}`).
// - Every search is charged to the caller's budget before it runs: (characters from the start of the
//   search to the end of the input + 1) x (program size), re2js's worst case; re2js cannot be stopped
//   midway, so the budget refuses a search it cannot afford instead of interrupting it.
//
// Differences from JavaScript RegExp that remain (RE2's semantics, kept on purpose):
// - Matching is by code point: `.` and a class match a whole surrogate pair (`^.$` matches "😀", which
//   JavaScript without the u flag sees as two code units); offsets are still UTF-16 indices.
// - Inside a class, POSIX names (`[[:alpha:]]`) mean the POSIX class; a quantifier after an assertion
//   (`^*`), an error in JavaScript, is taken.
// - Which match is chosen, and so the groups, are JavaScript's (leftmost-first, greedy or lazy as written),
//   except that RE2 takes an optional round of a loop that matches the empty string, which JavaScript
//   rejects (/(\b|a){1,2}/ on "a": JavaScript "a", here ""), and groups inside a loop keep their last value.
import { RE2JS, RE2JSException } from 're2js';

/** A pattern this module will not run: not regular, not understood, or too large. */
export class UnsupportedPattern extends Error {}

/** Charged before each search; throws when the caller's allowance is spent. */
export interface StepBudget {
  spend(steps: number): void;
}

/** Instructions a pattern may compile to: `(?:x{100}){100}` would otherwise be ten thousand, and more. */
export const MAX_PROGRAM_SIZE = 10_000;
/** Capture groups: the NFA carries their offsets with every thread. */
export const MAX_GROUPS = 100;
const MAX_NESTING = 64;

// JavaScript's WhiteSpace and LineTerminator (what `\s` matches there; RE2's `\s` is only [\t\n\f\r ]),
// as class members in RE2 syntax, and their complement for `\S` inside a class.
const SPACE = '\\t-\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}';
const NOT_SPACE =
  '\\x00-\\x08\\x0e-\\x1f\\x21-\\x9f\\x{a1}-\\x{167f}\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}\\x{202a}-\\x{202e}' +
  '\\x{2030}-\\x{205e}\\x{2060}-\\x{2fff}\\x{3001}-\\x{fefe}\\x{ff00}-\\x{10ffff}';
// JavaScript's `.` stops at every line terminator; RE2's only at \n.
const DOT = '[^\\n\\r\\x{2028}\\x{2029}]';

/** `{n}`, `{n,}` or `{n,m}` at `at` (JavaScript reads other braces as literal text, and so does RE2). */
function braces(source: string, at: number): RegExpExecArray | null {
  const quantifier = /\{(\d+)(,(\d*))?\}/y;
  quantifier.lastIndex = at;
  return quantifier.exec(source);
}

/**
 * Checks a JavaScript pattern, rewrites `.`, `\s`, `\S` and `[\b]` into RE2 spellings with JavaScript's
 * meaning, and bounds from above the instructions it compiles to (each atom 1, each group 3 more, each
 * `|` 2, each `*`, `+`, `?` 3, `{n,m}` m copies of its operand and 2(m - n) + 3 more): re2js's compiler
 * expands a counted repetition into copies, and nothing else multiplies. The bound is checked against
 * re2js's programSize() in the tests.
 */
function translate(source: string): { pattern: string; sizeBound: number } {
  const refuse = (message: string): never => {
    throw new UnsupportedPattern(message);
  };
  // One frame per open group: the instructions of its closed part, and of the last atom or group (what a
  // quantifier repeats).
  const frames = [{ size: 0, last: 0 }];
  let frame = frames[0];
  let out = '';
  let i = 0;
  const atom = (text: string) => {
    out += text;
    frame.size += 1;
    frame.last = 1;
  };
  // One escape after its backslash, in a class or not; returns its RE2 text.
  const escape = (inClass: boolean): string => {
    const c = source[i + 1];
    if (c === undefined) return refuse('a "\\" at the end of the pattern');
    i += 2;
    if (c === 's') return inClass ? SPACE : `[${SPACE}]`;
    if (c === 'S') return inClass ? NOT_SPACE : `[^${SPACE}]`;
    if (inClass && c === 'b') return '\\x08';
    if ('dDwWnrtfv'.includes(c) || (!inClass && (c === 'b' || c === 'B'))) return `\\${c}`;
    if (c === '0' && !/[0-9]/.test(source[i] ?? '')) return '\\x00';
    if (/[0-9]/.test(c) || c === 'k') return refuse(`backreferences (\\${c}) are not supported`);
    if (c === 'c' && /[A-Za-z]/.test(source[i] ?? '')) return `\\c${source[i++]}`;
    if (c === 'x' || c === 'u') {
      const digits = source.slice(i, i + (c === 'x' ? 2 : 4));
      if (!/^[0-9A-Fa-f]+$/.test(digits) || digits.length !== (c === 'x' ? 2 : 4)) refuse(`a malformed \\${c} escape`);
      i += digits.length;
      // An escaped surrogate pair stands for one code point, as RE2 reads the input.
      const low = /^\\u(d[c-f][0-9a-f]{2})/i.exec(source.slice(i, i + 6));
      if (c === 'u' && /^d[89ab]/i.test(digits) && low) {
        i += 6;
        return `\\x{${(0x10000 + ((parseInt(digits, 16) - 0xd800) << 10) + parseInt(low[1], 16) - 0xdc00).toString(16)}}`;
      }
      return `\\x{${digits}}`;
    }
    if (/[A-Za-z0-9]/.test(c)) return refuse(`the escape \\${c} is not supported`);
    // Any other character stands for itself; RE2 takes escapes of ASCII punctuation only.
    return c > '\x7f' ? c : `\\${c}`;
  };
  while (i < source.length) {
    const c = source[i];
    if (c === '\\') {
      atom(escape(false));
    } else if (c === '[') {
      // A JavaScript class ends at the first unescaped "]" ("[]" matches nothing, "[^]" anything).
      let text = '[';
      i++;
      if (source[i] === '^') text += source[i++];
      while (i < source.length && source[i] !== ']') text += source[i] === '\\' ? escape(true) : source[i++];
      if (i >= source.length) refuse('missing closing ]: an unterminated character class');
      i++;
      atom(`${text}]`);
    } else if (c === '(') {
      let head = '(';
      if (source[i + 1] === '?') {
        const kind = source[i + 2];
        const after = source[i + 3];
        if (kind === '=' || kind === '!' || (kind === '<' && (after === '=' || after === '!')))
          refuse('lookahead and lookbehind are not supported');
        const named = /^\(\?<[^>]*>/.exec(source.slice(i, i + 256));
        if (kind === ':') head = '(?:';
        else if (named)
          head = named[0]; // re2js checks the name
        else refuse('an invalid group: inline flags and "(?" forms other than (?: and (?<name> are not supported');
      }
      if (frames.length > MAX_NESTING) refuse(`groups nested deeper than ${MAX_NESTING}`);
      out += head;
      i += head.length;
      frames.push((frame = { size: 0, last: 0 }));
    } else if (c === ')' && frames.length > 1) {
      const group = frames.pop()!.size + 3;
      frame = frames[frames.length - 1];
      frame.size += group;
      frame.last = group;
      out += c;
      i++;
    } else if (c === '|') {
      frame.size += 2;
      frame.last = 0;
      out += c;
      i++;
    } else if (c === '*' || c === '+' || c === '?' || (c === '{' && braces(source, i))) {
      let factor = 1;
      let extra = 3;
      let text: string = c;
      i++;
      const counted = braces(source, i - 1);
      if (counted) {
        const [whole, min, comma, max] = counted;
        const [n, m] = [Number(min), comma === undefined ? Number(min) : max === '' ? Infinity : Number(max)];
        // re2js refuses counts above 1000 too; checked here so that the bound stays small.
        if (n > 1000 || (m !== Infinity && m > 1000)) refuse(`a repetition count above 1000 (${whole})`);
        factor = m === Infinity ? Math.max(n, 1) : m;
        extra = m === Infinity ? 3 : 2 * (m - n) + 3;
        // Written without leading zeros, which make RE2 read the braces as literal text.
        text = `{${n}${comma === undefined ? '' : `,${max === '' ? '' : m}`}}`;
        i += whole.length - 1;
      }
      if (source[i] === '?') text += source[i++]; // lazy
      frame.size += (factor - 1) * frame.last + extra;
      frame.last = frame.last * factor + extra;
      out += text;
    } else if (c === '.') {
      atom(DOT);
      i++;
    } else {
      atom(c);
      i++;
    }
    // The operand of a quantifier is part of its frame, so the frame's size bounds everything inside it.
    if (frame.size > MAX_PROGRAM_SIZE) return { pattern: out, sizeBound: Infinity };
  }
  // Groups left open (re2js refuses them) count as closed; 4 more for the program's start and end.
  return { pattern: out, sizeBound: frames.reduce((sum, f) => sum + f.size + 2, 2) };
}

export class LinearRegex {
  private readonly re: RE2JS;
  /** The bound on programSize computed before compiling. */
  readonly sizeBound: number;
  /** Instructions of the compiled program, what each character of a search is charged. */
  readonly programSize: number;
  /** Capture groups, not counting the whole match. */
  readonly groupCount: number;
  readonly groupNames: ReadonlyMap<string, number>;

  constructor(readonly source: string) {
    const { pattern, sizeBound } = translate(source);
    this.sizeBound = sizeBound;
    const tooLarge = `it compiles to more than ${MAX_PROGRAM_SIZE} instructions`;
    if (sizeBound > MAX_PROGRAM_SIZE) throw new UnsupportedPattern(tooLarge);
    try {
      this.re = RE2JS.compile(RE2JS.translateRegExp(pattern));
    } catch (error) {
      if (error instanceof RE2JSException) throw new UnsupportedPattern(error.message);
      throw error;
    }
    this.programSize = this.re.programSize();
    if (this.programSize > MAX_PROGRAM_SIZE) throw new UnsupportedPattern(tooLarge); // should the bound be wrong
    this.groupCount = this.re.groupCount();
    if (this.groupCount > MAX_GROUPS) throw new UnsupportedPattern(`more than ${MAX_GROUPS} capture groups`);
    this.groupNames = new Map(Object.entries(this.re.namedGroups()));
  }

  /** Whether the pattern matches anywhere in the input (re2js's DFA, without groups). */
  test(input: string, budget: StepBudget): boolean {
    budget.spend((input.length + 1) * this.programSize);
    return this.re.test(input);
  }

  /**
   * The leftmost match at or after `from` (JavaScript's choice among matches there: leftmost-first, greedy
   * or lazy as written), as [start, end] offsets per group (-1 for a group that took no part), or null.
   * `^` and `\b` still see the input before `from`.
   */
  exec(input: string, from: number, budget: StepBudget): number[] | null {
    budget.spend((input.length - from + 1) * this.programSize);
    const matcher = this.re.matcher(input);
    if (!matcher.find(from)) return null;
    const offsets: number[] = [];
    for (let group = 0; group <= this.groupCount; group++) offsets.push(matcher.start(group), matcher.end(group));
    return offsets;
  }
}
